"""Regression tests of viewer defects: a 0-frame BVH, atomic content replacement, the demo's pointer and frame
loop, ``--port`` out of range, and the export to BVH of glTF's float32 near-1 scales.

Tolerances: rest-pose positions are FK of the same arrays (1e-12); BVH stores 6 decimals (1e-4).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kinema
from kinema import SolverInputError, forward_kinematics
from kinema.viewer import ViewerState

#: Positions computed the same way twice.
SAME_POS_ATOL = 1e-12
#: BVH text keeps 6 decimals.
BVH_ATOL = 1e-4
#: Seconds a server-side wait may take before the test fails.
WAIT_S = 30.0

ZERO_FRAMES_BVH = """HIERARCHY
ROOT Hips
{
\tOFFSET 0 0 0
\tCHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
\tJOINT Spine
\t{
\t\tOFFSET 0 1 0
\t\tCHANNELS 3 Zrotation Xrotation Yrotation
\t\tEnd Site
\t\t{
\t\t\tOFFSET 0 1 0
\t\t}
\t}
}
MOTION
Frames: 0
Frame Time: 0.0333333
"""


def _wait(cond: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


# ------------------------------------------------------------------ a BVH with 0 frames
def test_zero_frame_bvh_shows_the_rest_pose(tmp_path: Path) -> None:
    path = tmp_path / "zero.bvh"
    path.write_text(ZERO_FRAMES_BVH)
    st = ViewerState.from_file(path)
    assert st.n_frames == 0 and st.clip is None  # no frame to play: the rest pose, as a file without animation
    rest = forward_kinematics(st.skeleton, st.skeleton.rest_pose()).positions
    np.testing.assert_allclose(st.positions, rest, rtol=0, atol=SAME_POS_ATOL)
    st.set_frame(0)
    assert st.advance(1.0) == 0
    g = st.add_chain("Spine_End", 2, "CCD")
    st.set_target(g.id, st.positions[g.end] + np.array([0.3, -0.2, 0.0]))
    out = st.export(tmp_path / "posed.bvh")  # the rest pose with the goal, one frame
    skel2, clip2 = kinema.io.load_bvh(out)
    assert clip2.n_frames == 1
    end = forward_kinematics(skel2, clip2.pose).positions[0, skel2.index("Spine_End")]
    np.testing.assert_allclose(end, st.positions[g.end], atol=BVH_ATOL)


def test_opening_a_zero_frame_bvh_in_the_viewer(toy: Any, tmp_path: Path) -> None:
    from kinema.viewer import serve

    (tmp_path / "zero.bvh").write_text(ZERO_FRAMES_BVH)
    skel, clip = toy
    v = serve(state=ViewerState(skel, clip), port=0, block=False, root=tmp_path, export_dir=tmp_path, verbose=False)
    try:
        assert v.app.open_file("zero.bvh") is None
        st = v.state
        assert st.skeleton.n_joints == 3 and st.positions.shape == (3, 3) and st.n_frames == 0
        v.app.refresh()
        st.set_frame(0)
        v.app.add_chain("Spine_End", 1, "CCD")
    finally:
        v.close()


def test_content_that_cannot_be_shown_leaves_the_old_content(toy: Any, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading is atomic: when the new content fails to evaluate, everything of the old one is kept."""
    skel, clip = toy
    st = ViewerState(skel, clip)
    g = st.add_chain("l_wrist", 2)
    st.set_frame(5)
    before = {name: getattr(st, name) for name in ("skeleton", "clip", "source", "frame", "goals", "version")}
    positions = st.positions.copy()
    other = tmp_path / "other.bvh"
    kinema.io.save_bvh(other, skel, clip)
    evaluate = ViewerState.evaluate

    def failing(self: ViewerState) -> Any:
        if self.skeleton is not skel:
            raise SolverInputError("cannot pose this")
        return evaluate(self)

    monkeypatch.setattr(ViewerState, "evaluate", failing)
    msg = st.load(other)
    assert msg is not None and "cannot pose this" in msg
    for name, value in before.items():
        assert getattr(st, name) is value, name
    assert st.goals == [g]
    np.testing.assert_array_equal(st.positions, positions)
    st.set_frame(6)  # still works on the old content
    assert st.frame == 6


# ------------------------------------------------------------------ export to BVH of a glTF file
@pytest.mark.parametrize("name", ["RiggedFigure.gltf", "RiggedSimple.gltf"])
def test_export_to_bvh_snaps_float32_unit_scales(name: str, tmp_path: Path) -> None:
    pytest.importorskip("pygltflib")
    src = Path(__file__).resolve().parents[1] / "data" / "gltf" / name
    st = ViewerState.from_file(src)
    scales = np.concatenate([st.skeleton.scales.reshape(-1), st.clip.pose.scales.reshape(-1)])
    assert np.any(scales != 1.0) and np.allclose(scales, 1.0, atol=1e-5)  # 1 up to float32 rounding only
    out = st.export(tmp_path / "kinema_ik.bvh")
    skel2, clip2 = kinema.io.load_bvh(out)
    baked = st.bake()
    assert clip2.n_frames == baked.n_frames
    np.testing.assert_allclose(forward_kinematics(skel2, clip2.pose).positions,
                               forward_kinematics(st.skeleton, baked.pose).positions, atol=BVH_ATOL)


# ------------------------------------------------------------------ the demo in the viewer
@pytest.fixture
def follow() -> Any:
    from kinema.demos import _registry
    from kinema.viewer._demo import serve_demo

    v = serve_demo(_registry.load("follow"), fps=60.0, port=0, block=False, verbose=False)
    yield v
    v.close()


def test_demo_refuses_a_bad_pointer_and_keeps_running(follow: Any) -> None:
    app = follow.app
    _wait(lambda: app.frames > 3, "the first frames")
    pointer = app.session.pointer.copy()
    for bad in ([1e200, 0.0, 0.0], [np.nan, 0.0, 0.0], [0.0, np.inf, 0.0]):
        with pytest.raises(SolverInputError, match="pointer refused"):
            app.move_pointer(np.array(bad))
        np.testing.assert_array_equal(app.session.pointer, pointer)  # nothing changed
    # from the gizmo (a client's value): refused with a message in the page, the gizmo put back
    app.pointer.position = (np.nan, 0.0, 0.0)
    app._on_pointer()
    assert "pointer refused" in app.message.content
    assert np.all(np.isfinite(app.pointer.position))
    f = app.frames
    _wait(lambda: app.frames > f + 5, "frames after the refused pointer")
    assert follow._thread.is_alive()
    target = np.array([0.5, 0.5, 0.0])
    app.move_pointer(target)
    _wait(lambda: np.linalg.norm(app.session.target - target[:2]) < 1e-3, "the arm's target to follow")
    assert app.message.content == ""


def test_demo_frame_loop_survives_a_failing_frame(follow: Any, capsys: pytest.CaptureFixture[str]) -> None:
    app = follow.app
    _wait(lambda: app.frames > 3, "the first frames")
    step = app.session.step
    failures = [3]

    def failing_step(dt: float) -> None:
        if failures[0] > 0:
            failures[0] -= 1
            raise SolverInputError("one bad frame")
        step(dt)

    app.session.step = failing_step
    _wait(lambda: failures[0] == 0, "the failing frames")
    f = app.frames
    _wait(lambda: app.frames > f + 5, "frames after the failures")
    assert follow._thread.is_alive()
    assert "one bad frame" in app.message.content
    err = capsys.readouterr().err
    assert err.count("[kinema demo] frame failed: SolverInputError: one bad frame") == 1  # said once, not per frame


# ------------------------------------------------------------------ --port out of range
class _Served(Exception):
    """A stand-in for serving: reaching it means the command line was taken."""


def _refuse_to_serve(*args: Any, **kwargs: Any) -> Any:
    raise _Served


@pytest.mark.parametrize("argv", [["view", "--port", "70000"], ["view", "--port", "65536"], ["view", "--port", "-1"],
                                  ["demo", "follow", "--port", "-1"], ["demo", "follow", "--port", "99999"],
                                  ["view", "--port", "http"]])
def test_port_out_of_range_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from _cli import one_error_line, run
    from kinema.viewer import _demo, _serve

    monkeypatch.setattr(_serve, "serve", _refuse_to_serve)  # a missing check fails here, it does not hang
    monkeypatch.setattr(_demo, "serve_demo", _refuse_to_serve)
    code, _, err = run(capsys, *argv)
    assert code == 2 and "--port" in one_error_line(err) and "0..65535" in err


def test_ports_in_range_are_taken(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from kinema.viewer import _demo, _serve

    seen: list[int] = []

    def record(*args: Any, port: int, **kwargs: Any) -> Any:
        seen.append(port)
        raise _Served

    monkeypatch.setattr(_serve, "serve", record)
    monkeypatch.setattr(_demo, "serve_demo", record)
    from kinema.cli import main

    with pytest.raises(_Served):
        main(["--debug", "view", "--port", "0"])
    with pytest.raises(_Served):
        main(["--debug", "demo", "follow", "--port", "65535"])
    assert seen == [0, 65535]


# ------------------------------------------------------------------ the compile notice's depth
def test_compile_notice_ignores_the_end_of_a_compile_it_did_not_see_start() -> None:
    """A compile already running in another thread when the listener is registered ends without a start:
    no "done" without "compiling" before it; nested compiles still count once."""
    from kinema.cli._ui import _CompileDepth

    seen: list[bool] = []
    depth = _CompileDepth(seen.append)
    depth.change(False)
    assert seen == []
    for start in (True, True, False, False):
        depth.change(start)
    assert seen == [True, False]


def test_the_warm_up_thread_is_not_left_running(toy: Any) -> None:
    """warm_up_with_notice returns with its notice publisher done (no thread left behind)."""
    from kinema.viewer import _serve

    skel, clip = toy
    st = ViewerState(skel, clip)
    before = set(threading.enumerate())
    _serve.warm_up_with_notice(st, verbose=False)
    assert not [t for t in set(threading.enumerate()) - before if t.name == "kinema-view-compile-notice"]


@pytest.mark.parametrize("port", [70000, -1, 65536, True, 8080.0, "8080", None])
def test_serve_and_serve_demo_refuse_a_bad_port_before_starting(port: Any) -> None:
    """The library functions check the port as the command line does: viser's server thread raised
    OverflowError for 70000 and the call waited for ever."""
    from kinema import SolverInputError
    from kinema.demos import _registry
    from kinema.viewer import _demo, _serve

    with pytest.raises(SolverInputError, match=r"port must be an integer in 0\.\.65535"):
        _serve.serve(port=port, block=False, verbose=False)
    with pytest.raises(SolverInputError, match=r"port must be an integer in 0\.\.65535"):
        _demo.serve_demo(_registry.load("follow"), fps=30.0, port=port, block=False, verbose=False)
