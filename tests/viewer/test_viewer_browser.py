"""The viewer in a real headless Chromium (Debian's, driven by the playwright package; never a downloaded browser).

viser's websocket runs in a web worker, so the page cannot be asked what it
received: every check reads the server-side :class:`kinema.viewer.ViewerState`
(or the viser handles), and the page is only clicked, dragged and photographed.

Run alone: ``.venv/bin/pytest tests/viewer/test_viewer_browser.py -m browser``.
``KINEMA_DOCS_IMAGES=docs/images`` also writes the README pictures there.
"""

from __future__ import annotations

import io
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _viewer_files import tree

pytestmark = pytest.mark.browser

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--enable-unsafe-swiftshader",  # WebGL on the CPU (SwiftShader) with --disable-gpu
]
VIEWPORT = {"width": 1280, "height": 800}

#: Generous: a 2-core CI machine compiles the solver kernels and renders WebGL on the CPU.
PAGE_TIMEOUT_MS = 120_000
WAIT_S = 120.0


def _chromium() -> str:
    path = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if path is None:
        if shutil.which("apt-get"):
            pytest.fail("Chromium is missing: apt-get install -y chromium (.ci/run installs it)")
        pytest.skip("no Chromium and no apt-get to install it")
    return path


def wait_for(cond: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    """Poll ``cond`` until it returns something truthy (returned) or fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        value = cond()
        if isinstance(value, np.ndarray) or value:  # an image counts as found
            return value
        if time.monotonic() > end:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    exe = _chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


BROKEN_BVH = "HIERARCHY\nROOT hips\n{\n  OFFSET 0 0\n"


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The sample, served with a root holding one broken file; the tests never open another rig in it."""
    from kinema.viewer import ViewerState, available_solvers, serve

    state = ViewerState.from_sample()
    # compile every solver's kernels before a browser waits on them (numba caches them afterwards)
    assert state.warm_up() == available_solvers()
    root = tmp_path_factory.mktemp("root")
    (root / "broken.bvh").write_text(BROKEN_BVH)
    v = serve(state=state, port=0, block=False, root=root, export_dir=tmp_path_factory.mktemp("exports"),
              verbose=False)
    yield v
    v.close()


@pytest.fixture
def files_viewer(tmp_path: Path, shared_data: Path) -> Iterator[Any]:
    """A fresh viewer of the sample whose root holds the cm mocap BVH, the metre RiggedFigure glTF and a
    symlink out of the root; ``viewer.folders`` names ``base``, ``root``, ``outside`` and ``out``."""
    from kinema.viewer import serve

    root, outside, out = tmp_path / "root", tmp_path / "outside", tmp_path / "out"
    for d in (root / "mocap", outside, out):
        d.mkdir(parents=True)
    shutil.copy(shared_data / "bvh" / "test_mocapbank.bvh", root / "mocap" / "test_mocapbank.bvh")
    shutil.copy(shared_data / "gltf" / "RiggedFigure.gltf", root / "RiggedFigure.gltf")
    (outside / "secret.bvh").write_text(BROKEN_BVH)
    os.symlink(outside / "secret.bvh", root / "link_out.bvh")
    os.symlink(outside, root / "outside_link")
    v = serve(port=0, block=False, root=root, export_dir=out, verbose=False)
    v.folders = {"base": tmp_path, "root": root, "outside": outside, "out": out}  # type: ignore[attr-defined]
    yield v
    v.close()


def _reset(viewer: Any) -> None:
    """Remove every chain and go back to frame 0, as a user would between tests."""
    st = viewer.state
    for gid in [g.id for g in st.goals]:
        st.remove_chain(gid)
        viewer.app._remove_chain_ui(viewer.app._chains.pop(gid))
    st.playing = False
    st.set_frame(0)
    viewer.app.refresh()


def open_page(browser: Any, viewer: Any) -> tuple[Any, Any]:
    """A new tab on the viewer; returns ``(page, client handle)`` once the server sees it."""
    before = set(viewer.server.get_clients())
    page = browser.new_page(viewport=VIEWPORT)
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto(viewer.url, timeout=PAGE_TIMEOUT_MS)
    page.wait_for_selector("canvas", timeout=PAGE_TIMEOUT_MS)
    new = wait_for(lambda: set(viewer.server.get_clients()) - before, "the tab to connect")
    client = viewer.server.get_clients()[min(new)]
    return page, client


def hide_notices(page: Any) -> None:
    """Hide toast notifications (the software-WebGL notice covers the top left of the view)."""
    page.add_style_tag(content=".mantine-Notifications-root { display: none !important; }")


def set_camera(client: Any, position: Any, look_at: Any) -> None:
    """Place the tab's camera and wait until the browser reports it back."""
    client.camera.up_direction = (0.0, 1.0, 0.0)
    client.camera.position = tuple(map(float, position))
    client.camera.look_at = tuple(map(float, look_at))
    wait_for(lambda: np.allclose(client.camera.position, position, atol=1e-6)
             and np.allclose(client.camera.look_at, look_at, atol=1e-6) and client.camera.image_width > 0,
             "the camera to reach the tab")
    time.sleep(0.5)


def project(client: Any, page: Any, points: Any) -> np.ndarray:
    """Page pixel coordinates ``(N, 2)`` of world ``points (N, 3)`` seen by the tab's camera.

    viser's camera follows OpenCV: ``R = wxyz`` maps camera to world with +z
    forward, +y down, +x right; ``fov`` is vertical.  ``u = w/2 + f x/z``,
    ``v = h/2 + f y/z`` with ``f = (h/2) / tan(fov/2)``, offset by the canvas box.
    """
    from kinema import rotation

    cam = client.camera
    w, x, y, z = cam.wxyz
    r = rotation.as_matrix([x, y, z, w])
    p = (np.atleast_2d(points) - cam.position) @ r  # rows: R^T (p - t)
    width, height = cam.image_width, cam.image_height
    f = (height / 2.0) / np.tan(cam.fov / 2.0)
    box = page.locator("canvas").first.bounding_box()
    sx, sy = box["width"] / width, box["height"] / height
    u = box["x"] + sx * (width / 2.0 + f * p[:, 0] / p[:, 2])
    v = box["y"] + sy * (height / 2.0 + f * p[:, 1] / p[:, 2])
    return np.stack([u, v], axis=1)


def screenshot(page: Any, path: Path | None = None) -> np.ndarray:
    from PIL import Image

    data = page.locator("canvas").first.screenshot(timeout=PAGE_TIMEOUT_MS)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(np.int32)


def canvas_origin(page: Any) -> np.ndarray:
    box = page.locator("canvas").first.bounding_box()
    return np.array([box["x"], box["y"]])


def bone_pixels(img: np.ndarray) -> int:
    """Pixels in the bones' blue (clearly bluer than red): the rig itself, not the white floor."""
    return int(np.count_nonzero((img[..., 2] - img[..., 0] > 40) & (img[..., 2] > 120)))


# ---------------------------------------------------------------------------------------------
def test_page_loads_and_canvas_is_not_blank(browser: Any, viewer: Any) -> None:
    _reset(viewer)
    page, client = open_page(browser, viewer)
    hide_notices(page)
    try:
        page.get_by_text("15 joints").first.wait_for(timeout=PAGE_TIMEOUT_MS)  # the GUI arrived
        img = wait_for(lambda: (lambda im: im if bone_pixels(im) > 200 else None)(screenshot(page)),
                       "the rig to render")
        gray = img.mean(axis=2)
        assert gray.std() > 10.0, "the canvas is blank"
        assert len(np.unique(img.reshape(-1, 3), axis=0)) > 50
    finally:
        page.close()


def test_dragging_the_target_gizmo_moves_the_end_joint(browser: Any, viewer: Any) -> None:
    _reset(viewer)
    st, app = viewer.state, viewer.app
    page, client = open_page(browser, viewer)
    hide_notices(page)
    try:
        # add a chain with the GUI (the default end joint is a wrist, the default length 2)
        page.get_by_role("button", name="Add chain").click()
        goal = wait_for(lambda: st.goals[0] if st.goals else None, "the chain to be added")
        gizmo = wait_for(lambda: app._chains.get(goal.id), "the chain's gizmos").target
        start = np.array(gizmo.position, dtype=np.float64)
        end_before = st.positions[goal.end].copy()
        np.testing.assert_allclose(end_before, start, atol=1e-9)

        # look at the gizmo from the front (+z), so its x arrow runs left to right on screen
        set_camera(client, start + np.array([0.0, 0.25, 1.6]), start)
        scale = float(gizmo.scale)
        (c_uv, a_uv) = project(client, page, [start, start + np.array([0.75 * scale, 0.0, 0.0])])
        axis_uv = (a_uv - c_uv) / np.linalg.norm(a_uv - c_uv)
        assert axis_uv[0] > 0.9  # the arrow is horizontal on screen
        # drag towards the shoulder, so the target stays in reach
        sign = 1.0 if st.positions[goal.joints[0]][0] > start[0] else -1.0
        drag_px = 70.0
        page.mouse.move(*a_uv)
        page.mouse.down()
        for k in range(1, 15):
            page.mouse.move(*(a_uv + sign * axis_uv * drag_px * k / 14.0))
            time.sleep(0.03)
        page.mouse.up()

        # the server gets the gizmo's new position and re-solves
        moved = wait_for(lambda: abs(gizmo.position[0] - start[0]) > 1e-3 and np.allclose(
            goal.target, gizmo.position, atol=1e-12), "the drag to reach the server")
        assert moved
        time.sleep(0.5)  # let the last update of the gesture arrive
        wait_for(lambda: np.allclose(goal.target, gizmo.position, atol=1e-12), "the final gizmo position")
        gizmo_pos = np.array(gizmo.position, dtype=np.float64)
        shift = gizmo_pos - start
        # along x only, by roughly the dragged pixels at the gizmo's depth
        px_per_m = float(np.linalg.norm(a_uv - c_uv)) / (0.75 * scale)
        expected = drag_px / px_per_m
        assert np.sign(shift[0]) == sign
        assert 0.5 * expected < abs(shift[0]) < 1.5 * expected, (shift, expected)
        np.testing.assert_allclose(shift[1:], 0.0, atol=1e-6)
        with st.lock:
            end_now = st.positions[goal.end].copy()
            err = goal.status.error
        # the solved end joint sits on the gizmo
        assert np.linalg.norm(end_now - gizmo_pos) <= goal.tolerance, (end_now, gizmo_pos)
        assert err <= goal.tolerance and goal.status.reached
        assert np.linalg.norm(end_now - end_before) > 0.5 * abs(shift[0])
        # and the page's panel says so
        names = st.skeleton.names
        page.get_by_text(f"{names[goal.joints[0]]} -> {names[goal.end]}").first.wait_for(timeout=PAGE_TIMEOUT_MS)
    finally:
        page.close()


def gui_input(page: Any, handle: Any) -> Any:
    """The page's input element of a viser GUI handle (its label points at the handle's id)."""
    uuid = handle._impl.uuid
    direct = page.locator(f'input[id="{uuid}"]')
    if direct.count():
        return direct.first
    return page.locator(f'xpath=//label[@for="{uuid}"]/ancestor::div[contains(@class, "mantine-Flex-root")][1]'
                        '//input').first


def _pick(page: Any, handle: Any, option: str) -> None:
    """Choose ``option`` in the dropdown of a viser GUI handle, with the mouse."""
    gui_input(page, handle).click()
    page.get_by_role("option", name=option, exact=True).click()


def test_switching_solver_and_chain(browser: Any, viewer: Any) -> None:
    from kinema.viewer import available_solvers

    _reset(viewer)
    st, app = viewer.state, viewer.app
    page, client = open_page(browser, viewer)
    try:
        solvers = available_solvers()
        # the new-chain panel offers every solver kinema has
        gui_input(page, app._new_solver).click()
        options = [o.inner_text().strip() for o in page.get_by_role("option").all()]
        assert options == solvers
        page.keyboard.press("Escape")

        goal = app.add_chain("right_wrist", 2, solvers[0])
        ui = app._chains[goal.id]
        page.get_by_text(f"chain {goal.id}: right_wrist").first.wait_for(timeout=PAGE_TIMEOUT_MS)
        other = next((s for s in solvers if s != goal.solver), None)
        if other is not None:
            before = st.solve_count
            _pick(page, ui.widgets["solver"], other)
            wait_for(lambda: goal.solver == other and st.solve_count > before, "the solver switch")
        # switch the chain to the left leg
        _pick(page, ui.widgets["end"], "left_ankle")
        sk = st.skeleton
        wait_for(lambda: goal.end == sk.index("left_ankle"), "the chain switch")
        assert goal.joints.tolist() == [sk.index("left_hip"), sk.index("left_knee"), sk.index("left_ankle")]
        wait_for(lambda: np.allclose(ui.target.position, st.positions[goal.end], atol=1e-6), "the gizmo to follow")
        # the switched goal solves with the switched solver
        target = st.positions[goal.end] + np.array([0.05, 0.15, 0.0])
        st.set_target(goal.id, target)
        assert goal.status.message == "" and goal.status.reached
        np.testing.assert_allclose(st.positions[goal.end], target, atol=goal.tolerance)
    finally:
        page.close()


def test_tabs_disconnects_and_bad_files(browser: Any, viewer: Any, tmp_path: Path) -> None:
    _reset(viewer)
    st, app = viewer.state, viewer.app
    page1, c1 = open_page(browser, viewer)
    page2, c2 = open_page(browser, viewer)
    try:
        assert c1.client_id != c2.client_id and len(viewer.server.get_clients()) >= 2
        page1.close()
        wait_for(lambda: c1.client_id not in viewer.server.get_clients(), "the closed tab to disconnect")
        # the server keeps going: the other tab still edits the shared state
        page2.get_by_role("button", name="Add chain").click()
        wait_for(lambda: len(st.goals) == 1, "a chain added from the remaining tab")
        page3, c3 = open_page(browser, viewer)
        page3.close()
        # a bad file, picked from the file list: a message in the page and in the state's log, nothing replaced
        skeleton = st.skeleton
        _pick(page2, app._file, "broken.bvh")
        wait_for(lambda: app._file.value == "broken.bvh", "the choice to reach the server")
        page2.get_by_role("button", name="Open").click()
        page2.get_by_text("could not open broken.bvh").first.wait_for(timeout=PAGE_TIMEOUT_MS)
        assert any("broken.bvh" in m for m in st.messages)
        assert str(app.files.root) not in app._message.content  # the page is told the name, not the folder
        assert st.skeleton is skeleton and len(st.goals) == 1
    finally:
        page2.close()


def test_screenshot_of_the_sample_posed_by_ik(browser: Any, viewer: Any, tmp_path: Path) -> None:
    """Hands reaching forward and a foot on a step, by IK; the picture shows it and is saved."""
    _reset(viewer)
    st, app = viewer.state, viewer.app
    page, client = open_page(browser, viewer)
    hide_notices(page)
    try:
        center = st.positions.mean(axis=0)
        set_camera(client, center + np.array([1.3, 0.45, 1.9]), center)
        before = screenshot(page)
        sk = st.skeleton
        goals = {end: app.add_chain(end, 2) for end in ("right_wrist", "left_wrist", "right_ankle", "left_ankle")}
        shoulder_r = st.positions[sk.index("right_shoulder")]
        shoulder_l = st.positions[sk.index("left_shoulder")]
        hip_r = st.positions[sk.index("right_hip")]
        targets = {
            "right_wrist": shoulder_r + np.array([0.35, 0.25, 0.05]),
            "left_wrist": shoulder_l + np.array([0.40, -0.05, -0.05]),
            "right_ankle": hip_r + np.array([0.30, -0.55, 0.0]),
        }
        for end, t in targets.items():
            g = goals[end]
            st.set_target(g.id, t)
            app._chains[g.id].target.position = tuple(t)
        app.refresh()
        for end, t in targets.items():
            g = goals[end]
            assert g.status.reached, (end, g.status)
            np.testing.assert_allclose(st.positions[g.end], t, atol=g.tolerance)
        out = tmp_path / "viewer_ik.png"
        wrist_uv = project(client, page, [targets["right_wrist"]])[0] - canvas_origin(page)

        def changed_at_wrist() -> np.ndarray | None:
            img = screenshot(page)
            diff = np.abs(img - before).max(axis=2) > 40
            u, v = np.round(wrist_uv).astype(int)
            return img if diff[max(v - 10, 0):v + 11, max(u - 10, 0):u + 11].any() else None

        img = wait_for(changed_at_wrist, "the raised hand to show in the page")
        screenshot(page, out)
        assert out.stat().st_size > 10_000 and img.mean(axis=2).std() > 10.0
        docs = os.environ.get("KINEMA_DOCS_IMAGES")
        if docs:
            page.screenshot(path=str(Path(docs) / "viewer.png"))
            screenshot(page, Path(docs) / "viewer_ik.png")
    finally:
        page.close()


# --------------------------------------------------------------------------------------------- files
#: A rig on screen covers at least this fraction of the canvas height and width (framed, it covers about
#: half the height; a rig framed for another size is a dot or fills nothing).
RIG_MIN_EXTENT = 0.15
#: ... and at least this many of the rig's own pixels.
RIG_MIN_PIXELS = 1500
#: A visible grid: at least this many grid-gray pixels.
GRID_MIN_PIXELS = 3000


def mesh_pixels(img: np.ndarray) -> np.ndarray:
    """The skinned mesh's warm tone (MESH_COLOR, shaded, over the white floor): clearly redder than blue."""
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    return (r - b > 20) & (g - b > 5) & (r > 80) & (r < 250)


def rig_mask(img: np.ndarray) -> np.ndarray:
    """Pixels of the rig: its blue bones or its mesh."""
    return ((img[..., 2] - img[..., 0] > 40) & (img[..., 2] > 120)) | mesh_pixels(img)


def grid_pixels(img: np.ndarray) -> int:
    """Gray pixels (the grid lines), neither white nor coloured."""
    spread = img.max(axis=2) - img.min(axis=2)
    return int(np.count_nonzero((spread < 10) & (img.max(axis=2) < 225) & (img.min(axis=2) > 100)))


def rig_extent(img: np.ndarray) -> tuple[int, float, float]:
    """``(pixels, width fraction, height fraction)`` of the rig's bounding box in the canvas."""
    mask = rig_mask(img)
    ys, xs = np.nonzero(mask)
    if not len(xs):
        return 0, 0.0, 0.0
    h, w = mask.shape
    return int(mask.sum()), (xs.max() - xs.min() + 1) / w, (ys.max() - ys.min() + 1) / h


def test_open_lists_only_the_root_and_frames_each_rig(browser: Any, files_viewer: Any, tmp_path: Path) -> None:
    """The page starts on the sample's four limb chains; its file list holds only the root's files; opening the
    centimetre mocap and then the metre glTF, without a reload, shows each rig large on screen with its grid."""
    v = files_viewer
    st, app = v.state, v.app
    page, client = open_page(browser, v)
    hide_notices(page)
    try:
        names = st.skeleton.names
        assert [names[g.end] for g in st.goals] == ["right_wrist", "left_wrist", "right_ankle", "left_ankle"]
        for g in st.goals:
            page.get_by_text(f"chain {g.id}: {names[g.end]}").first.wait_for(timeout=PAGE_TIMEOUT_MS)
        # the file list: only the loadable files under the root (no symlink out of it, nothing outside)
        gui_input(page, app._file).click()
        options = [o.inner_text().strip() for o in page.get_by_role("option").all()]
        assert options == ["RiggedFigure.gltf", "mocap/test_mocapbank.bvh"]
        page.keyboard.press("Escape")

        sizes = {}
        for rel, ends in (("mocap/test_mocapbank.bvh", ["RightWrist", "LeftWrist", "RightAnkle", "LeftAnkle"]),
                          ("RiggedFigure.gltf", [])):
            _pick(page, app._file, rel)
            wait_for(lambda rel=rel: app._file.value == rel, f"{rel} to be chosen")
            page.get_by_role("button", name="Open", exact=True).click()
            wait_for(lambda rel=rel: st.source == str(app.files.root / rel), f"{rel} to open")
            page.get_by_text(f"{Path(rel).name}: {st.skeleton.n_joints} joints").first.wait_for(
                timeout=PAGE_TIMEOUT_MS)
            assert [st.skeleton.names[g.end] for g in st.goals] == ends
            p = st.positions
            sizes[rel] = float(np.max(p.max(axis=0) - p.min(axis=0)))
            position, look_at, _, _ = app.camera_framing()
            # the open tab's camera was moved (viser itself only moves new tabs)
            wait_for(lambda position=position, look_at=look_at: np.allclose(client.camera.position, position)
                     and np.allclose(client.camera.look_at, look_at), "the tab's camera to frame the rig")

            def framed() -> np.ndarray | None:
                img = screenshot(page)
                n, fw, fh = rig_extent(img)
                ok = n >= RIG_MIN_PIXELS and fh >= RIG_MIN_EXTENT and fw >= RIG_MIN_EXTENT / 3
                return img if ok and grid_pixels(img) >= GRID_MIN_PIXELS else None

            img = wait_for(framed, f"{rel} to show large, with its grid")
            screenshot(page, tmp_path / f"open_{Path(rel).stem}.png")
            n, fw, fh = rig_extent(img)
            assert fh < 0.95, "the rig fills the whole view: framed too close"
        assert sizes["mocap/test_mocapbank.bvh"] > 50 * sizes["RiggedFigure.gltf"]  # cm and m, both framed
    finally:
        page.close()


def test_export_from_the_page_is_confined_and_asks_before_overwriting(browser: Any, files_viewer: Any) -> None:
    import kinema

    v = files_viewer
    st, app = v.state, v.app
    folders = v.folders
    out = folders["out"]
    (out / "taken.bvh").write_text("original")
    before = tree(folders["base"])
    page, client = open_page(browser, v)
    try:
        box = gui_input(page, app._export_name)

        def export(name: str) -> None:
            box.fill(name)
            box.press("Enter")
            wait_for(lambda: app._export_name.value == name, f"the name {name!r} to reach the server")
            page.get_by_role("button", name="Export clip with IK").click()

        # ../ and absolute paths are refused with a message, and nothing is written anywhere
        for name in ("../escape.bvh", "../../escape.bvh", str(folders["outside"] / "abs.bvh"), "mocap/x.bvh"):
            count = len(st.messages)
            export(name)
            wait_for(lambda count=count: len(st.messages) > count, f"{name!r} to be refused")
            assert "give a plain file name" in st.messages[-1]
            page.get_by_text("give a plain file name").first.wait_for(timeout=PAGE_TIMEOUT_MS)
            assert str(folders["base"]) not in app._message.content
        assert tree(folders["base"]) == before

        # an existing file: the page asks, and nothing is written until it is confirmed
        export("taken.bvh")
        confirm = page.get_by_role("button", name="Overwrite taken.bvh")
        confirm.wait_for(timeout=PAGE_TIMEOUT_MS)
        page.get_by_text("already exists in the output folder").first.wait_for(timeout=PAGE_TIMEOUT_MS)
        assert tree(folders["base"]) == before
        confirm.click()
        wait_for(lambda: (out / "taken.bvh").read_bytes() != b"original", "the confirmed overwrite")
        page.get_by_text("exported taken.bvh into the output folder").first.wait_for(timeout=PAGE_TIMEOUT_MS)
        wait_for(lambda: not app._overwrite.visible, "the Overwrite button to go")
        _, clip = kinema.io.load_bvh(out / "taken.bvh")
        assert clip.n_frames == st.n_frames

        # a new name is written at once, into the output folder only
        export("fresh.bvh")
        wait_for(lambda: (out / "fresh.bvh").exists(), "the new export")
        after = tree(folders["base"])
        changed = {k for k in set(before) | set(after) if before.get(k, b"") != after.get(k, b"")}
        assert changed == {"out/taken.bvh", "out/fresh.bvh"}
        assert not list(out.glob(".*.tmp"))
    finally:
        page.close()
