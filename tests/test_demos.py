"""The seed demos (kinema.demos, ``kinema demo``): what each one promises, checked frame by frame.

Tolerances: reaches are analytic (1e-9); bone lengths are FK of rotations (1e-9 relative);
"no snap" / "no flip" compare the largest per-frame change with the median one (5x).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kinema.demos import _registry

pytest.importorskip("pygame")

#: A frame counts as drawn when its pixel values vary more than this (a blank frame has 0; the
#: sparsest demo frame, follow's, is above 100).
MIN_PIXEL_VARIANCE = 20.0
#: Consecutive frames differ in at least this many pixels.
MIN_CHANGED_PIXELS = 20
#: Largest per-frame change at most this many times the median one (snaps, flips).
JUMP_RATIO = 5.0
#: Stairs at 30 fps: the knee angle changes by at most this much (rad) between frames.
KNEE_STEP_MAX = 0.35
#: Frames left out of the "no flip" checks while the chains settle from their rest pose.
SETTLE_FRAMES = 10


def _bone_lengths(skeleton, pose) -> np.ndarray:  # type: ignore[no-untyped-def]
    from kinema.fk import forward_kinematics

    p = forward_kinematics(skeleton, pose).positions
    par = skeleton.parents
    kids = np.nonzero(par >= 0)[0]
    return np.linalg.norm(p[..., kids, :] - p[..., par[kids], :], axis=-1)


def _rest_lengths(skeleton) -> np.ndarray:  # type: ignore[no-untyped-def]
    return _bone_lengths(skeleton, skeleton.rest_pose())


def _angle_change(q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
    """Rotation angle (rad) from each quaternion of ``q0`` to the one of ``q1`` (the same shape, ``(..., 4)``)."""
    return 2.0 * np.arccos(np.clip(np.abs(np.sum(q0 * q1, axis=-1)), 0.0, 1.0))


# ------------------------------------------------------------------------------------------- follow
def test_follow_arm_reaches_every_reachable_target_and_clamps_the_rest_without_snapping() -> None:
    from kinema.demos import follow

    s = follow.make()
    lo = abs(follow.UPPER_LENGTH - follow.LOWER_LENGTH)
    hi = follow.UPPER_LENGTH + follow.LOWER_LENGTH
    margin = 1e-4 * min(follow.UPPER_LENGTH, follow.LOWER_LENGTH)  # solve_two_bone_2d's default
    ends, reachable, clamped = [], 0, 0
    for _ in range(int(12.0 * 60)):  # 12 s: the path leaves the reach outside and inside several times
        s.step(1.0 / 60.0)
        d = float(np.linalg.norm(s.target - follow.SHOULDER))
        end = s.arm.end
        assert abs(np.linalg.norm(s.arm.elbow - follow.SHOULDER) - follow.UPPER_LENGTH) <= 1e-9 * hi
        assert abs(np.linalg.norm(end - s.arm.elbow) - follow.LOWER_LENGTH) <= 1e-9 * hi
        if lo + margin <= d <= hi - margin:
            reachable += 1
            assert np.linalg.norm(end - s.target) <= 1e-9, (s.time, d)
        else:
            clamped += 1
            # clamped onto the reach limit, on the shoulder-target line
            r = float(np.linalg.norm(end - follow.SHOULDER))
            assert min(abs(r - (lo + margin)), abs(r - (hi - margin))) <= 1e-9
            u = (s.target - follow.SHOULDER) / d
            assert np.linalg.norm((end - follow.SHOULDER) - r * u) <= 1e-9
        ends.append(end.copy())
    assert reachable > 100 and clamped > 100  # both cases really happened
    step = np.linalg.norm(np.diff(np.array(ends), axis=0), axis=-1)
    # the end moves smoothly through the clamps: its fastest frame is within 2x its median (it is 1.23x)
    assert step.max() <= 2.0 * np.median(step), (step.max(), np.median(step))


def test_follow_smoothing_is_frame_rate_independent() -> None:
    """30 and 60 fps give the same smoothed target at the shared instants, within 5e-4 (0.025 % of the
    arm's 2.0 reach; it is 2.3e-4, only the difference of the two piecewise-linear pointer samplings;
    the article's per-frame lerp(0.15) would differ by tenths)."""
    from kinema.demos import follow

    at = {}
    for fps in (30, 60):
        s = follow.make()
        out = []
        for i in range(fps * 6):
            s.step(1.0 / fps)
            if (i + 1) % (fps // 30) == 0:
                out.append(s.target.copy())
        at[fps] = np.array(out)
    gap = np.linalg.norm(at[30] - at[60], axis=-1).max()
    assert gap <= 5e-4, gap
    # and the target really is smoothed: it lags the pointer
    s = follow.make()
    for _ in range(60):
        s.step(1.0 / 60.0)
    assert np.linalg.norm(s.pointer - s.target) > 0.05


def test_follow_bend_switch_and_tentacle() -> None:
    from kinema.demos import follow

    s = follow.make()
    for _ in range(30):
        s.step(1.0 / 60.0)
    assert s.state == "bend ccw"
    e0 = s.arm.elbow.copy()
    s.advance_state()
    assert s.state == "bend cw"
    # the other side: the elbow mirrored across the shoulder-end line, the end where it was
    u = s.arm.end - follow.SHOULDER
    cross = lambda v: u[0] * v[1] - u[1] * v[0]  # noqa: E731
    assert cross(e0 - follow.SHOULDER) > 0.0 > cross(s.arm.elbow - follow.SHOULDER)
    lengths = _rest_lengths(s.tentacle_skeleton)
    for _ in range(120):
        s.step(1.0 / 60.0)
        got = _bone_lengths(s.tentacle_skeleton, s.tentacle_pose)
        np.testing.assert_allclose(got, lengths, rtol=1e-9)
        assert np.all(np.abs(s.tentacle_positions[:, 2]) <= 1e-9)  # stays in the plane
        d = np.linalg.norm(s.target - follow.TENTACLE_ROOT)
        if d < 0.95 * follow.TENTACLE_LINKS * follow.TENTACLE_LINK_LENGTH:
            assert np.linalg.norm(s.tentacle_positions[-1, :2] - s.target) <= 1e-3  # FABRIK's tolerance


# ---------------------------------------------------------------------------------------- tentacles
def test_tentacles_no_flips_within_limits_bones_kept() -> None:
    from kinema.demos import tentacles as T

    s = T.make()
    lengths = _rest_lengths(s.skeleton)
    rest = s.skeleton.rotations[2:]
    prev = s.pose.rotations.copy()
    changes = []
    for f in range(240):
        if f in (120, 180):
            s.advance_state()  # rest, then chase again: the target eases over
        s.step(1.0 / 30.0)
        r = s.pose.rotations
        assert s.pose.batch_shape == (T.TENTACLES,)
        assert float(T.LINK_LIMIT.violation(r[:, 2:], rest).max()) <= 1e-9
        np.testing.assert_allclose(_bone_lengths(s.skeleton, s.pose), np.broadcast_to(lengths, (T.TENTACLES,) +
                                   lengths.shape), rtol=1e-9)
        changes.append(_angle_change(prev[:, 1:], r[:, 1:]).max())
        prev = r.copy()
    ch = np.array(changes[SETTLE_FRAMES:])
    assert ch.max() <= JUMP_RATIO * np.median(ch), (ch.max(), np.median(ch))
    assert np.median(ch) > 1e-3  # they do move
    assert s.state == "chase"


def test_tentacles_chase_the_target() -> None:
    from kinema.demos import tentacles as T

    s = T.make()
    dist = []
    for _ in range(150):
        s.step(1.0 / 30.0)
        dist.append(np.linalg.norm(s.positions[:, -1] - s.target, axis=-1).min())
    # on most frames some tip is on the target, within CCD's tolerance
    assert np.median(dist[SETTLE_FRAMES:]) <= T.TOLERANCE


# ------------------------------------------------------------------------------------------- stairs
def test_stairs_feet_on_steps_no_knee_flips_hips_lowered() -> None:
    from kinema.demos import stairs as S

    s = S.make()
    n = s.names
    lengths = _rest_lengths(s.skeleton)
    planted_frames, lowered, tight, tops = 0, 0, 0, []
    knee_prev: dict[str, float] = {}
    knee_steps: list[float] = []
    for _ in range(int(S.STEP_TIME * 12 * 30) - 5):  # the approach, the flight and onto the landing
        s.step(1.0 / 30.0)
        p = s.positions
        np.testing.assert_allclose(_bone_lengths(s.skeleton, s.pose), lengths, rtol=1e-9)
        for side, hip, knee, ankle in S.LEGS:
            k = s.planted[side]
            if k is not None:
                planted_frames += 1
                sole = p[n.index(ankle)][1] - S.ANKLE_HEIGHT
                assert abs(sole - S.tread_height(k)) <= 1e-3, (s.time, side)
                assert abs(p[n.index(ankle)][0] - S.tread_center(k)) <= 1e-3
            # the knee bends forward (toward the pole), never backward
            mid = 0.5 * (p[n.index(hip)] + p[n.index(ankle)])
            assert (p[n.index(knee)] - mid) @ S.FACING > 0.0, (s.time, side)
            a, b = p[n.index(hip)] - p[n.index(knee)], p[n.index(ankle)] - p[n.index(knee)]
            angle = math.acos(float(a @ b) / float(np.linalg.norm(a) * np.linalg.norm(b)))
            if side in knee_prev:
                knee_steps.append(abs(angle - knee_prev[side]))
            knee_prev[side] = angle
        lowered += s.lowered > 0.0
        # every foot target within the leg's reach, and when the pelvis is down by just what was needed
        # the farthest one is exactly at the reach limit (it really could not reach before)
        reach = S.REACH_FRACTION * s.leg_length
        far = max(np.linalg.norm(p[n.index(ankle)] - p[n.index(hip)]) for _, hip, _, ankle in S.LEGS)
        assert far <= reach + 1e-9
        if s.needed > 0.0 and s.lowered == s.needed:
            tight += 1
            assert far == pytest.approx(reach, abs=1e-9)
        tops.append(max(S.tread_height(k) for k in s.planted.values() if k is not None) if any(
            k is not None for k in s.planted.values()) else 0.0)
    assert planted_frames > 150
    assert max(tops) == pytest.approx(S.RISE * S.STEPS)  # it got to the top
    assert lowered > 0 and tight > 0  # the hips went down where a foot could not reach
    # a flip would turn the knee through ~pi in a frame; the fastest swing-start fold is ~0.29 rad
    ks = np.array(knee_steps)
    assert ks.max() <= KNEE_STEP_MAX, ks.max()


# ---------------------------------------------------------------------------------------- registry
def test_registry_lists_every_demo_whose_module_exists() -> None:
    import importlib.util

    names = _registry.available()
    for name, module in _registry.DEMO_MODULES.items():
        present = importlib.util.find_spec(module) is not None
        assert (name in names) == present
        if present:
            demo = _registry.load(name)
            s = demo["make"](seed=0)
            assert isinstance(s.state, str) and isinstance(s.auto, bool)
            s.step(1.0 / demo["fps"])
            s.advance_state()
            assert s.drawing().lines
    assert {"follow", "tentacles", "stairs"} <= set(names)
    with pytest.raises(_registry.DemoNotFoundError, match="choose one of: follow"):
        _registry.load("nosuch")


# ----------------------------------------------------------------------------------- command line
def _kinema(*argv: object) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SDL_VIDEODRIVER="dummy")
    return subprocess.run([sys.executable, "-m", "kinema.cli", *map(str, argv)], capture_output=True, text=True,
                          env=env, timeout=600)


@pytest.mark.parametrize("name", _registry.available())
def test_headless_run_writes_drawn_changing_frames(name: str, tmp_path: Path) -> None:
    from PIL import Image

    out = tmp_path / "frames"
    r = _kinema("demo", name, "--headless", "--frames", 8, "--out", out)
    assert r.returncode == 0, r.stderr
    files = sorted(out.iterdir())
    assert [f.name for f in files] == [f"frame_{i:04d}.png" for i in range(8)]  # and no temporary files
    imgs = [np.asarray(Image.open(f).convert("RGB")).astype(np.float64) for f in files]
    for img in imgs:
        assert img.shape == (480, 640, 3)
        assert img.var() > MIN_PIXEL_VARIANCE
    for a, b in zip(imgs[:-1], imgs[1:], strict=True):
        assert np.count_nonzero(np.any(a != b, axis=-1)) >= MIN_CHANGED_PIXELS
    # an existing frame is refused without --force, replaced with it
    again = _kinema("demo", name, "--headless", "--frames", 8, "--out", out)
    assert again.returncode == 1 and "--force" in again.stderr and len(again.stderr.strip().splitlines()) == 1
    assert _kinema("demo", name, "--headless", "--frames", 8, "--out", out, "--force").returncode == 0


def test_unknown_demo_is_one_line_listing_the_names(capsys: pytest.CaptureFixture[str]) -> None:
    from _cli import one_error_line, run

    code, _, err = run(capsys, "demo", "nosuch")
    line = one_error_line(err)
    assert code == 2  # a NAME that is no demo is a bad command line, as a missing one is
    assert "unknown demo 'nosuch'" in line
    for name in _registry.available():
        assert name in line


def test_demo_command_line_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from _cli import one_error_line, run

    monkeypatch.chdir(tmp_path)  # where `--out ""` would write
    for argv, needle in [
        (("demo", "follow", "--headless"), "--headless needs --out"),
        (("demo", "follow", "--headless", "--out", tmp_path / "a", "--frames", 0), "--frames must be"),
        (("demo", "follow", "--headless", "--out", tmp_path / "a", "--fps", -1), "--fps must be"),
        (("demo", "follow", "--out", tmp_path / "a"), "--out needs --headless"),
        (("demo",), "demo needs NAME"),
        (("demo", "follow", "--seed", -1), "--seed must be 0 or more"),
        (("demo", "follow", "--window", "--headless"), "--window shows the demo on screen"),
        (("demo", "follow", "--headless", "--frames", 2, "--out", ""), "--out needs a folder name"),
        (("demo", "nosuch", "--headless", "--out", tmp_path / "a"), "unknown demo 'nosuch'"),
    ]:
        code, _, err = run(capsys, *argv)
        assert code == 2 and needle in one_error_line(err), (argv, err)  # a bad command line (kinema --help)
    assert not (tmp_path / "a").exists()
    assert not list(tmp_path.glob("frame_*.png"))  # --out "" wrote nothing into the current folder
    (tmp_path / "file").write_text("x")
    code, _, err = run(capsys, "demo", "follow", "--headless", "--out", tmp_path / "file", "--frames", 1)
    assert code == 1 and "not a folder" in one_error_line(err)
    code, out, _ = run(capsys, "demo", "--list")
    assert code == 0 and [ln.split()[0] for ln in out.splitlines()] == _registry.available()


def test_an_interrupt_while_a_frame_is_written_stays_an_interrupt(tmp_path: Path) -> None:
    """Ctrl-C or SIGTERM during a frame's write reaches the command as an interrupt (exit 130 / 143, no
    temporary file), not as pygame's "error writing the PNG file" (exit 1).  The signal is simulated by the
    file's ``write`` raising what the handler raises; pygame would call it from its write callback."""
    import signal

    from kinema.cli._files import Interrupted
    from kinema.demos import follow
    from kinema.demos._png import fit_camera, render_png

    class SignalledFile:
        def __init__(self, exc: BaseException) -> None:
            self.exc = exc

        def write(self, data: bytes) -> int:
            raise self.exc

    camera = fit_camera(follow.make, 60.0, seconds=0.1)
    drawing = follow.make().drawing()
    for exc in (KeyboardInterrupt(), Interrupted(signal.SIGTERM)):
        with pytest.raises(type(exc)):
            render_png(drawing, camera, SignalledFile(exc))


def test_write_frames_interrupted_mid_write_leaves_no_temporary_file(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import signal

    from kinema.cli import _demo
    from kinema.cli._files import Interrupted
    from kinema.demos import _png

    save = _png.png_bytes

    def interrupted_on_frame_2(drawing, camera):  # type: ignore[no-untyped-def]
        interrupted_on_frame_2.calls += 1  # type: ignore[attr-defined]
        if interrupted_on_frame_2.calls == 3:  # type: ignore[attr-defined]
            raise Interrupted(signal.SIGTERM)
        return save(drawing, camera)

    interrupted_on_frame_2.calls = 0  # type: ignore[attr-defined]
    monkeypatch.setattr(_png, "png_bytes", interrupted_on_frame_2)
    out = tmp_path / "f"
    with pytest.raises(Interrupted):
        _demo.write_frames(_registry.load("follow"), str(out), 5, fps=30.0, seed=0, force=False)
    assert sorted(p.name for p in out.iterdir()) == ["frame_0000.png", "frame_0001.png"]  # no temporary file


def test_window_mode_follows_the_mouse() -> None:
    """``--window`` under SDL's dummy driver: a mouse motion becomes follow's pointer (the world point under
    it: world_at inverts the camera's pixels to 1e-9 px), space switches the bend."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    import pygame

    from kinema.demos import follow
    from kinema.demos._window import run_window

    seen: dict[str, object] = {}

    def on_frame(i: int, session: follow.FollowSession, camera) -> None:  # type: ignore[no-untyped-def]
        if i == 2:
            pygame.event.post(pygame.event.Event(pygame.MOUSEMOTION, pos=(400, 150), rel=(0, 0), buttons=(0, 0, 0)))
            pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=pygame.K_SPACE, mod=0, unicode=" ",
                                                 scancode=44))
        if i == 3:
            seen["pointer"], seen["world"] = session.pointer.copy(), camera.world_at((400, 150))
            seen["auto"], seen["state"] = session.auto, session.state

        if i == 4:
            px = np.array([[123.0, 321.0]])
            seen["round_trip"] = camera.pixels(camera.world_at(px[0])[None]) - px

    shown = run_window(follow.DEMO, fps=60.0, max_frames=5, on_frame=on_frame)
    assert np.abs(seen["round_trip"]).max() <= 1e-9  # type: ignore[call-overload]
    assert shown == 5
    np.testing.assert_allclose(seen["pointer"], np.asarray(seen["world"])[:2], atol=1e-12)
    assert seen["auto"] is False and seen["state"] == "bend cw"


def test_window_without_a_display_is_one_line() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER")}
    r = subprocess.run([sys.executable, "-m", "kinema.cli", "demo", "follow", "--window", "--frames", "5"],
                       capture_output=True,
                       text=True, env=env, timeout=300)
    if r.returncode == 0:
        pytest.skip("this machine has a display")
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("kinema:")]
    assert r.returncode == 1 and len(lines) == 1 and "--headless" in lines[0], r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("name", ["follow", "tentacles", "stairs", "fishing"])
def test_each_demo_is_documented_with_its_picture(name: str) -> None:
    root = Path(__file__).resolve().parents[1]
    page = (root / "docs" / "demos.md").read_text()
    readme = (root / "README.md").read_text()
    assert f"\n## {name}\n" in page and f"kinema demo {name}" in page
    assert f"(images/demo-{name}.png)" in page and f"(docs/images/demo-{name}.png)" in readme
    assert (root / "docs" / "images" / f"demo-{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
