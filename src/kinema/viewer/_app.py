"""The viser glue: scene nodes and GUI controls over a :class:`ViewerState`.

Every GUI event calls a :class:`ViewerState` method (which re-solves) and then
:meth:`ViewerApp.refresh` pushes the new joint positions to every connected
browser tab.  The scene and the GUI are server-wide (``server.scene``,
``server.gui``), so all tabs show and edit the same rig.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ._files import ExportExistsError, FileAccess, ViewerPathError
from ._geometry import (
    bone_instances,
    icosphere,
    joint_radius,
    limit_segments,
    unit_bone_mesh,
    xyzw_to_wxyz,
)
from ._state import ChainGoal, ViewerState, available_solvers, markdown_escape

__all__ = ["ViewerApp"]

#: Playback ticks per second at most (the clip's own rate when lower).
MAX_PLAYBACK_FPS = 30.0

#: Chain lengths offered in the GUI (bones).
MAX_CHAIN_LENGTH = 8

JOINT_COLOR = (235, 235, 240)
BONE_COLOR = (90, 150, 230)
TARGET_COLOR = (230, 70, 60)
POLE_COLOR = (250, 190, 40)
LIMIT_COLOR = (60, 190, 110)
MESH_COLOR = (200, 170, 150)

#: The export box's first name (written into the output folder).
DEFAULT_EXPORT_NAME = "kinema_ik.bvh"

#: What the file list shows when the root holds nothing to open.
NO_FILES = "(no .bvh, .gltf or .glb files under the root)"

#: The camera frames the rig from this offset, in units of the rig's size (front-right, a little above).
CAMERA_OFFSET = (0.7, 0.3, 1.25)

#: Camera clipping planes as multiples of the rig's size (viser's fixed 0.01 and 1000 suit
#: a metre rig only: a centimetre rig 170 units tall needs them 100 times farther).
CAMERA_NEAR_FACTOR = 1e-3
CAMERA_FAR_FACTOR = 1e3

#: The grid fades out at this many rig sizes from the camera (viser's fixed 100 hides the
#: whole grid of a centimetre rig, which the camera sees from about 250 units away).
GRID_FADE_FACTOR = 12.0


@dataclass
class _ChainUI:
    """Scene and GUI handles of one goal."""

    target: Any
    pole: Any
    pole_line: Any
    limits: Any
    folder: Any
    widgets: dict[str, Any] = field(default_factory=dict)


def _log(message: str) -> None:
    print(f"[kinema view] {message}", file=sys.stderr, flush=True)


class ViewerApp:
    """Shows ``state`` in ``server`` (a ``viser.ViserServer``) and wires the controls.

    ``files``: the folders the page may read (Open, from a list of the files
    under ``files.root``) and write (export, into ``files.out_dir``); default:
    both the current folder.  ``limb_chains``: start (and start each opened
    file) with the four limb chains of a recognised humanoid.  Call
    :meth:`close` to stop the playback thread (the server itself is the
    caller's).
    """

    def __init__(self, state: ViewerState, server: Any, *, files: FileAccess | None = None,
                 limb_chains: bool = True) -> None:
        self.state = state
        self.server = server
        self.files = files if files is not None else FileAccess(os.getcwd(), os.getcwd())
        self.limb_chains = limb_chains
        self._pending_overwrite: str | None = None  # the export name whose overwrite the page must confirm
        self._quiet = 0  # >0 while the server itself assigns GUI values (their callbacks must not act)
        self._chains: dict[int, _ChainUI] = {}
        self._rig_version = -1
        self._stop = threading.Event()
        self._refresh_lock = threading.RLock()
        self.refresh_count = 0

        server.scene.set_up_direction("+y")
        if limb_chains and not state.goals:
            state.add_limb_chains()
        self._build_gui()
        self._build_scene()
        self._frame_camera()
        server.on_client_connect(self._on_connect)
        server.on_client_disconnect(self._on_disconnect)
        self._thread = threading.Thread(target=self._playback_loop, name="kinema-view-playback", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ utils
    @contextlib.contextmanager
    def _silent(self) -> Iterator[None]:
        self._quiet += 1
        try:
            yield
        finally:
            self._quiet -= 1

    def _guard(self, fn: Callable[..., None]) -> Callable[..., None]:
        """Wrap a GUI callback: ignore echoes of our own assignments; report errors instead of dying."""

        def run(event: Any) -> None:
            if self._quiet:
                return
            try:
                fn(event)
            except Exception as exc:  # a GUI action failed: tell the user, keep serving
                self._error(f"{type(exc).__name__}: {exc}")
                traceback.print_exc()

        return run

    def _error(self, message: str) -> None:
        """Report a failed action: the full text in the terminal, the page's (no outside paths) in the page."""
        self.state.note(message)
        _log(message)
        shown = self.files.public(message)
        self._set_message(f"**Error:** {markdown_escape(shown)}")
        for client in self.server.get_clients().values():
            with contextlib.suppress(Exception):
                client.add_notification(title="kinema", body=shown, color="red", auto_close_seconds=8.0)

    def _set_message(self, text: str) -> None:
        self._message.content = text

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)

    # ------------------------------------------------------------------ GUI
    def _build_gui(self) -> None:
        gui = self.server.gui
        st = self.state
        # no share button: it would open a tunnel to the internet
        gui.configure_theme(control_width="large", dark_mode=False, show_logo=False, show_share_button=False)
        gui.main_panel.dock_right()  # beside the 3D view, never over it
        self._message = gui.add_markdown(self._source_line())

        with gui.add_folder("File"):
            options = self._file_options()
            current = self._relative_source()
            self._file = gui.add_dropdown("file", options=options,
                                          initial_value=current if current in options else options[0])
            self._open = gui.add_button("Open")
            self._open.on_click(self._guard(self._on_open))
            self._rescan = gui.add_button("Refresh file list", color="gray")
            self._rescan.on_click(self._guard(lambda _: self._refresh_file_list()))
            self._export_name = gui.add_text("export as", initial_value=DEFAULT_EXPORT_NAME)
            self._export_name.on_update(self._guard(lambda _: self._cancel_overwrite()))
            self._export = gui.add_button("Export clip with IK")
            self._export.on_click(self._guard(self._on_export))
            self._overwrite = gui.add_button("Overwrite", color="red", visible=False)
            self._overwrite.on_click(self._guard(self._on_overwrite))

        with gui.add_folder("Timeline"):
            self._play = gui.add_checkbox("play", initial_value=st.playing)
            self._play.on_update(self._guard(lambda e: self._set_playing(bool(self._play.value))))
            self._frame = gui.add_slider("frame", min=0, max=max(st.n_frames - 1, 1), step=1, initial_value=0,
                                         disabled=st.n_frames <= 1)
            self._frame.on_update(self._guard(self._on_frame))
            self._speed = gui.add_slider("speed", min=0.1, max=2.0, step=0.1, initial_value=1.0)
            self._speed.on_update(self._guard(self._on_speed))

        with gui.add_folder("IK"):
            solvers = available_solvers() or ["(none)"]
            cands = st.chain_candidates(1) or list(st.skeleton.names)
            self._new_end = gui.add_dropdown("end joint", options=cands, initial_value=cands[0])
            self._new_len = gui.add_slider("length", min=1, max=MAX_CHAIN_LENGTH, step=1, initial_value=2)
            self._new_solver = gui.add_dropdown("solver", options=solvers, initial_value=solvers[0])
            self._add = gui.add_button("Add chain")
            self._add.on_click(self._guard(self._on_add))
            self._use_limits = gui.add_checkbox("joint limits", initial_value=st.use_limits)
            self._use_limits.on_update(self._guard(self._on_limits))
            self._status = gui.add_markdown(st.status_markdown())
        self._chains_folder = gui.add_folder("Chains")

    def _file_options(self) -> list[str]:
        return self.files.listing() or [NO_FILES]

    def _relative_source(self) -> str | None:
        """The viewed file relative to the root (None for the sample or a file outside the root)."""
        src = self.state.source
        return None if src is None else self.files.relative(src)

    def _refresh_file_list(self, select: str | None = None) -> None:
        """Walk the root again (the dropdown then offers what is there now), showing ``select`` when listed."""
        options = self._file_options()
        current = select if select in options else self._file.value
        if current not in options:
            current = self._relative_source()
        with self._silent():
            self._file.options = options
            self._file.value = current if current in options else options[0]

    def _source_line(self) -> str:
        st = self.state
        src = "bundled sample" if st.source is None else os.path.basename(st.source)
        frames = f"{st.n_frames} frames at {st.fps:.4g} fps" if st.clip is not None else "no animation"
        return f"**{markdown_escape(src)}**: {st.skeleton.n_joints} joints, {frames}"

    def _sync_timeline_gui(self) -> None:
        st = self.state
        with self._silent():
            self._frame.max = max(st.n_frames - 1, 1)
            self._frame.disabled = st.n_frames <= 1
            self._frame.value = st.frame
            self._play.value = st.playing
            cands = st.chain_candidates(1) or list(st.skeleton.names)
            self._new_end.options = cands
            self._new_end.value = cands[0]

    # --------------------------------------------------------------- scene
    def _build_scene(self) -> None:
        """(Re)create the rig nodes for the current skeleton."""
        st = self.state
        scene = self.server.scene
        with st.lock:
            pos = st.positions.copy()
            version = st.version
            skel = st.skeleton
            mesh = st.mesh
        for ui in list(self._chains.values()):
            self._remove_chain_ui(ui)
        self._chains.clear()
        for handle in getattr(self, "_rig_nodes", []):
            with contextlib.suppress(Exception):  # already gone (a tab never saw it): nothing to remove
                handle.remove()
        self._rig_nodes: list[Any] = []
        self.radius = joint_radius(skel, pos)
        clip_pos = self._clip_extent()
        lo, hi = clip_pos
        self._floor = float(lo[1])
        size = float(max(hi[0] - lo[0], hi[2] - lo[2], hi[1] - lo[1], 1e-6))
        cell = 10.0 ** np.floor(np.log10(size / 4.0))
        ground = scene.add_grid(
            "/ground", width=3 * size, height=3 * size, plane="xz", cell_size=float(cell), section_size=float(cell * 5),
            position=(float((lo[0] + hi[0]) / 2), self._floor, float((lo[2] + hi[2]) / 2)),
            fade_distance=GRID_FADE_FACTOR * size,
        )
        sv, sf = icosphere(2)
        self._joint_mesh = scene.add_batched_meshes_simple(
            "/rig/joints", sv * self.radius, sf, batched_wxyzs=np.tile([1.0, 0, 0, 0], (skel.n_joints, 1)),
            batched_positions=pos, batched_colors=JOINT_COLOR, cast_shadow=False, receive_shadow=False,
        )
        bv, bf = unit_bone_mesh()
        kids, bpos, bq, bs = bone_instances(skel, pos, self.radius * 0.9)
        self._bone_count = len(kids)
        self._bone_mesh = None
        if len(kids):
            self._bone_mesh = scene.add_batched_meshes_simple(
                "/rig/bones", bv, bf, batched_wxyzs=bq, batched_positions=bpos, batched_scales=bs,
                batched_colors=BONE_COLOR, flat_shading=True, cast_shadow=False, receive_shadow=False,
            )
        self._rig_nodes += [ground, self._joint_mesh] + ([self._bone_mesh] if self._bone_mesh is not None else [])
        self._skinned = None
        if mesh is not None:
            self._skinned = scene.add_mesh_skinned(
                "/mesh", mesh.positions, mesh.indices,
                bone_wxyzs=xyzw_to_wxyz(mesh.bind_rotations), bone_positions=mesh.bind_positions,
                skin_weights=mesh.skin_weights(skel.n_joints), color=MESH_COLOR, opacity=0.85,
            )
            self._rig_nodes.append(self._skinned)
        self._rig_version = version
        self._sync_timeline_gui()
        for goal in list(st.goals):
            self._add_chain_ui(goal)
        self.refresh()

    def _clip_extent(self) -> tuple[np.ndarray, np.ndarray]:
        """Bounding box of the joints over (a sample of) the clip, for the floor and the camera."""
        st = self.state
        from ..fk import forward_kinematics

        if st.clip is None or st.n_frames <= 1:
            p = st.positions
        else:
            idx = np.unique(np.linspace(0, st.n_frames - 1, min(st.n_frames, 16)).astype(int))
            p = forward_kinematics(st.skeleton, st.clip.pose.broadcast()[idx]).positions.reshape(-1, 3)
        return p.min(axis=0), p.max(axis=0)

    def camera_framing(self) -> tuple[np.ndarray, np.ndarray, float, float]:
        """``(position, look_at, near, far)`` framing the current pose from the front-right, a little above.

        Everything scales with the rig's size (its pose's largest extent, in
        the file's units), so a centimetre rig is framed like a metre one.
        """
        p = self.state.positions
        lo, hi = p.min(axis=0), p.max(axis=0)
        center = (lo + hi) / 2.0
        size = float(np.max(hi - lo)) or 1.0
        position = center + size * np.asarray(CAMERA_OFFSET)
        return position, center, CAMERA_NEAR_FACTOR * size, CAMERA_FAR_FACTOR * size

    def _frame_camera(self) -> None:
        """Aim the initial camera (new tabs, "reset view") and every open tab's camera at the rig."""
        position, look_at, near, far = self.camera_framing()
        pos_t = tuple(float(x) for x in position)
        look_t = tuple(float(x) for x in look_at)
        cam = self.server.initial_camera
        cam.near, cam.far = near, far
        cam.up = (0.0, 1.0, 0.0)
        cam.look_at = look_t
        cam.position = pos_t
        for client in self.server.get_clients().values():
            # viser moves only new tabs to the initial camera; the open ones are moved here.  A tab
            # whose camera has not reported yet (still loading; viser asserts on reading it) gets the
            # initial one.
            with contextlib.suppress(AssertionError):
                c = client.camera
                c.near, c.far = near, far
                c.up_direction = (0.0, 1.0, 0.0)
                c.position = pos_t
                c.look_at = look_t

    def refresh(self) -> None:
        """Push the state's current pose, gizmos and diagnostics to every tab."""
        st = self.state
        with self._refresh_lock:
            if st.version != self._rig_version:
                self._build_scene()
                return
            with st.lock:
                pos = st.positions.copy()
                rots = st.rotations.copy()
                posed = st.posed
                goals = list(st.goals)
                markdown = st.status_markdown()
                frame = st.frame
            with self.server.atomic():
                self._joint_mesh.batched_positions = pos
                if self._bone_mesh is not None:
                    _, bpos, bq, bs = bone_instances(st.skeleton, pos, self.radius * 0.9)
                    if len(bpos) == self._bone_count:
                        self._bone_mesh.batched_positions = bpos
                        self._bone_mesh.batched_wxyzs = bq
                        self._bone_mesh.batched_scales = bs
                if self._skinned is not None:
                    wxyz = xyzw_to_wxyz(rots)
                    for j, bone in enumerate(self._skinned.bones):
                        bone.wxyz = wxyz[j]
                        bone.position = pos[j]
                for g in goals:
                    ui = self._chains.get(g.id)
                    if ui is None:
                        continue
                    mid = pos[int(g.joints[len(g.joints) // 2])]
                    ui.pole_line.points = np.stack([mid, g.pole])[None]
                    ui.pole_line.visible = g.use_pole and g.enabled
                    ui.pole.visible = g.use_pole and g.enabled
                    segs = self._limit_lines(g, pos, rots, posed)
                    ui.limits.points = segs if len(segs) else np.zeros((1, 2, 3))
                    ui.limits.visible = bool(len(segs)) and st.use_limits
                self._status.content = markdown
                with self._silent():
                    self._frame.value = frame
            self.refresh_count += 1

    def _limit_lines(self, g: ChainGoal, pos: np.ndarray, rots: np.ndarray, posed: Any) -> np.ndarray:
        st = self.state
        segs = []
        for k, j in enumerate(g.joints[:-1]):
            lim = st.limits.get(int(j))
            if lim is not None:
                segs.append(limit_segments(st.skeleton, posed, pos, rots, int(j), lim, child=int(g.joints[k + 1])))
        return np.concatenate(segs) if segs else np.zeros((0, 2, 3))

    # --------------------------------------------------------------- chains
    def _add_chain_ui(self, goal: ChainGoal) -> None:
        scene, gui = self.server.scene, self.server.gui
        st = self.state
        base = f"/ik/chain{goal.id}"
        chain_len = max(float(np.linalg.norm(np.diff(st.positions[goal.joints], axis=0), axis=1).sum()), 1e-6)
        gizmo = 0.35 * chain_len
        target = scene.add_transform_controls(f"{base}/target", scale=gizmo, disable_rotations=True,
                                              depth_test=False, position=tuple(goal.target))
        scene.add_icosphere(f"{base}/target/ball", radius=self.radius * 2.0, color=TARGET_COLOR)
        pole = scene.add_transform_controls(f"{base}/pole", scale=0.6 * gizmo, disable_rotations=True,
                                            depth_test=False, position=tuple(goal.pole))
        scene.add_icosphere(f"{base}/pole/ball", radius=self.radius * 1.5, color=POLE_COLOR)
        pole_line = scene.add_line_segments(f"{base}/pole_line", np.zeros((1, 2, 3)), POLE_COLOR,
                                            thickness=2.0, thickness_units="screen")
        limits = scene.add_line_segments(f"{base}/limits", np.zeros((1, 2, 3)), LIMIT_COLOR,
                                         thickness=2.5, thickness_units="screen", visible=False)
        gid = goal.id

        def on_target(event: Any) -> None:
            st.set_target(gid, np.asarray(event.target.position))
            self.refresh()

        def on_pole(event: Any) -> None:
            st.set_pole(gid, np.asarray(event.target.position))
            self.refresh()

        target.on_update(self._guard(on_target))
        pole.on_update(self._guard(on_pole))

        names = st.skeleton.names
        cands = st.chain_candidates(1)
        solvers = available_solvers()
        with self._chains_folder:
            folder = gui.add_folder(f"chain {gid}: {names[goal.end]}")
        with folder:
            w: dict[str, Any] = {}
            w["end"] = gui.add_dropdown("end joint", options=cands, initial_value=names[goal.end])
            w["length"] = gui.add_slider("length", min=1, max=MAX_CHAIN_LENGTH, step=1, initial_value=goal.length)
            w["solver"] = gui.add_dropdown("solver", options=solvers, initial_value=goal.solver)
            w["weight"] = gui.add_slider("weight", min=0.0, max=1.0, step=0.01, initial_value=goal.weight)
            w["use_pole"] = gui.add_checkbox("pole", initial_value=goal.use_pole)
            w["enabled"] = gui.add_checkbox("active", initial_value=goal.enabled)
            w["remove"] = gui.add_button("Remove chain", color="red")
        ui = _ChainUI(target=target, pole=pole, pole_line=pole_line, limits=limits, folder=folder, widgets=w)
        self._chains[gid] = ui

        def change(key: str) -> Callable[[Any], None]:
            def run(event: Any) -> None:
                value = event.target.value
                if key == "end":
                    st.update_chain(gid, end=value)
                elif key == "length":
                    st.update_chain(gid, length=int(value))
                else:
                    st.update_chain(gid, **{key: value})
                if key in ("end", "length"):
                    g = st.goal(gid)
                    ui.target.position = tuple(g.target)
                    ui.pole.position = tuple(g.pole)
                    folder.label = f"chain {gid}: {names[g.end]}"
                self.refresh()

            return run

        def revert(key: str, fn: Callable[[Any], None]) -> Callable[[Any], None]:
            """Run ``fn``; on failure put the widget back to the goal's value (the error is reported)."""

            def run(event: Any) -> None:
                try:
                    fn(event)
                except Exception:
                    g = st.goal(gid)
                    with self._silent():
                        w[key].value = {"end": names[g.end], "length": g.length, "solver": g.solver}.get(
                            key, w[key].value)
                    raise

            return run

        for key in ("end", "length", "solver", "weight", "use_pole", "enabled"):
            w[key].on_update(self._guard(revert(key, change(key))))

        def on_remove(_: Any) -> None:
            st.remove_chain(gid)
            self._remove_chain_ui(self._chains.pop(gid))
            self.refresh()

        w["remove"].on_click(self._guard(on_remove))

    def _remove_chain_ui(self, ui: _ChainUI) -> None:
        for h in (ui.target, ui.pole, ui.pole_line, ui.limits, ui.folder):
            with contextlib.suppress(Exception):
                h.remove()

    # ------------------------------------------------------------ callbacks
    def add_chain(self, end: str, length: int, solver: str | None = None) -> ChainGoal:
        """Add a goal (as the **Add chain** button does) and show its gizmos."""
        goal = self.state.add_chain(end, length, solver)
        with self._refresh_lock:
            self._add_chain_ui(goal)
        self.refresh()
        return goal

    def _on_add(self, _: Any) -> None:
        solver = self._new_solver.value if self._new_solver.value in available_solvers() else None
        goal = self.add_chain(self._new_end.value, int(self._new_len.value), solver)
        self._set_message(f"added chain {goal.id}: {markdown_escape(self.state.skeleton.names[goal.end])} "
                          f"({goal.solver})")

    def open_file(self, rel: str) -> str | None:
        """Open ``rel`` (a path under the root, as the file list gives it) as the **Open** button does.

        Returns None on success or the error message (also shown in the
        page); the new rig gets its limb chains, a fresh scene and grid, and
        every tab's camera is framed on it.
        """
        if rel == NO_FILES:
            raise ViewerPathError("nothing to open: there are no .bvh, .gltf or .glb files under the root")
        path = self.files.open_path(rel)
        with self._refresh_lock:
            with self.state.lock:
                err = self.state.load(path)
                if err is None and self.limb_chains:
                    self.state.add_limb_chains()
            if err is not None:
                self._error(err)
                return self.files.public(err)
            _log(f"opened {path}")
            self._build_scene()
            self._frame_camera()
        self._refresh_file_list(select=rel)
        self._set_message(self._source_line())
        return None

    def _on_open(self, _: Any) -> None:
        self.open_file(str(self._file.value))

    def _cancel_overwrite(self) -> None:
        """Forget a pending overwrite (the name changed, or it was written)."""
        self._pending_overwrite = None
        self._overwrite.visible = False

    def _on_export(self, _: Any) -> None:
        """Export into the output folder; an existing file is only written after **Overwrite** is pressed."""
        name = self._export_name.value.strip() or DEFAULT_EXPORT_NAME
        try:
            target = self.files.export_target(name)
        except ExportExistsError:
            self._pending_overwrite = name
            self._overwrite.label = f"Overwrite {name}"
            self._overwrite.visible = True
            shown = markdown_escape(name)
            self._set_message(f"**{shown}** already exists in the output folder: press **Overwrite {shown}** "
                              "to replace it, or change the name")
            return
        self._write_export(target, name)

    def _on_overwrite(self, _: Any) -> None:
        name = self._export_name.value.strip() or DEFAULT_EXPORT_NAME
        pending = self._pending_overwrite
        self._cancel_overwrite()
        if pending != name:
            raise ViewerPathError("the export name changed since the overwrite was asked; press Export again")
        self._write_export(self.files.export_target(name, overwrite=True), name)

    def _write_export(self, target: Path, name: str) -> None:
        self._cancel_overwrite()
        self.state.export(target)
        _log(f"exported {target}")
        self._set_message(f"exported **{markdown_escape(name)}** into the output folder")
        self._refresh_file_list()  # the output folder may be (under) the root

    def _on_frame(self, event: Any) -> None:
        self.state.set_frame(int(event.target.value))
        self.refresh()

    def _on_speed(self, event: Any) -> None:
        self.state.speed = float(event.target.value)

    def _on_limits(self, event: Any) -> None:
        with self.state.lock:
            self.state.use_limits = bool(event.target.value)
            self.state.evaluate()
        self.refresh()

    def _set_playing(self, playing: bool) -> None:
        self.state.playing = playing and self.state.n_frames > 1

    def _on_connect(self, client: Any) -> None:
        _log(f"browser connected (client {client.client_id}; {len(self.server.get_clients())} open)")

    def _on_disconnect(self, client: Any) -> None:
        _log(f"browser disconnected (client {client.client_id}); still serving")

    # ------------------------------------------------------------ playback
    def _playback_loop(self) -> None:
        last = time.perf_counter()
        while not self._stop.is_set():
            st = self.state
            step = 1.0 / min(MAX_PLAYBACK_FPS, max(st.fps, 1.0))
            self._stop.wait(step)
            now = time.perf_counter()
            dt, last = now - last, now
            if not st.playing:
                continue
            try:
                before = st.frame
                if st.advance(dt) != before:
                    self.refresh()
            except Exception as exc:  # keep the server alive; stop playing and say why
                st.playing = False
                self._error(f"playback stopped: {type(exc).__name__}: {exc}")
