"""Frame timing of the writers, and the command line's output checks.

A clip loaded from kinema's own GLB (float32 key times) saves as BVH, while a
time moved by 1% of a step is still refused, with one definition of "evenly
spaced" for the library and the command line; the BVH Frame Time comes from
``clip.times``.  On the command line: an output type kinema does not write and
``--mesh`` with BVH output are usage errors (exit 2); an overflowing
``--scale`` and a huge ``--fps`` give one short line; a file name with a line
break is printed on one line.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from _cli import one_error_line, run
from kinema import Skeleton, SolverInputError
from kinema.cli import _commands, _files
from kinema.io import _bvh, load_bvh, load_gltf, save_bvh, save_gltf
from kinema.pose import Clip, Pose

#: The frame rate of the BVH read back, relative: its Frame Time is written with 9 significant digits, and the
#: glTF times it came from are float32 (2**-24 of each time, over a 99-step span).
FPS_RTOL = 1e-7


def chain() -> Skeleton:
    return Skeleton(["root", "mid", "tip"], [-1, 0, 1], [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0]])


def moving_clip(n: int, fps: float = 30.0, times: np.ndarray | None = None) -> Clip:
    t = np.zeros((n, 3, 3))
    t[:, 0, 0] = np.arange(n)  # integers: exact in float32 and in the BVH text
    t[:, 1:, 1] = 1.0
    return Clip(Pose(t, np.tile([0.0, 0.0, 0.0, 1.0], (n, 3, 1))), fps, times)


# ------------------------------------------------------------ library
def test_a_clip_loaded_from_glb_saves_as_bvh(tmp_path: Path) -> None:
    sk = chain()
    # frames at given times (as another tool writes them): the glTF keeps only their float32 key times
    save_gltf(tmp_path / "a.glb", sk, moving_clip(100, times=np.arange(100) / 30.0))
    asset = load_gltf(tmp_path / "a.glb")
    clip = asset.clips["clip"]
    assert clip.times is not None and not np.array_equal(clip.times, np.arange(100) / 30.0)  # float32-rounded
    save_bvh(tmp_path / "a.bvh", asset.skeleton, clip)
    _, back = load_bvh(tmp_path / "a.bvh")
    assert back.n_frames == 100
    assert back.fps == pytest.approx(30.0, rel=FPS_RTOL)
    np.testing.assert_array_equal(back.pose.translations[:, 0, 0], np.arange(100.0))


def test_a_time_moved_by_one_percent_of_a_step_is_refused(tmp_path: Path) -> None:
    times = np.arange(100) / 30.0
    times[50] += 0.01 / 30.0
    with pytest.raises(SolverInputError, match="evenly spaced"):
        save_bvh(tmp_path / "x.bvh", chain(), moving_clip(100, times=times))
    assert not (tmp_path / "x.bvh").exists()
    # the same clip through a GLB (float32 times) is refused too
    save_gltf(tmp_path / "u.glb", chain(), moving_clip(100, times=times))
    asset = load_gltf(tmp_path / "u.glb")
    with pytest.raises(SolverInputError, match="evenly spaced"):
        save_bvh(tmp_path / "x.bvh", asset.skeleton, asset.clips["clip"])


def test_a_real_exporters_times_count_as_even(shared_data: Path, tmp_path: Path) -> None:
    """Khronos' RiggedSimple: times off by more than float32 rounding (3e-7 of the largest), written as they are."""
    asset = load_gltf(shared_data / "gltf" / "RiggedSimple.gltf")
    clip = next(iter(asset.clips.values()))
    assert clip.times is not None and _bvh.evenly_spaced(clip.times)
    unscaled = Clip(Pose(clip.pose.translations, clip.pose.rotations), clip.fps, clip.times)  # BVH has no scale
    save_bvh(tmp_path / "r.bvh", asset.skeleton, unscaled)
    assert load_bvh(tmp_path / "r.bvh")[1].n_frames == clip.n_frames == 50


def test_the_command_line_asks_the_library_whether_times_are_even() -> None:
    assert _files.evenly_spaced is _bvh.evenly_spaced and _commands.evenly_spaced is _bvh.evenly_spaced
    assert not hasattr(_files, "NEAR_EVEN_RTOL")


def test_the_bvh_frame_time_comes_from_the_clip_times(tmp_path: Path) -> None:
    sk = chain()
    clip = moving_clip(5, fps=30.0, times=np.arange(5) * 0.1)  # fps disagrees with the times: the times win
    save_bvh(tmp_path / "t.bvh", sk, clip)
    save_gltf(tmp_path / "t.glb", sk, clip)
    bvh_fps = load_bvh(tmp_path / "t.bvh")[1].fps
    assert bvh_fps == pytest.approx(10.0, rel=1e-9)  # 0.1 written with 9 digits
    assert load_gltf(tmp_path / "t.glb").clips["clip"].fps == pytest.approx(bvh_fps, rel=FPS_RTOL)
    two = moving_clip(2, fps=30.0, times=[1.0, 1.25])  # two frames: their one step
    save_bvh(tmp_path / "two.bvh", sk, two)
    assert load_bvh(tmp_path / "two.bvh")[1].fps == pytest.approx(4.0, rel=1e-9)


# ------------------------------------------------------------ command line
@pytest.fixture
def small_bvh(tmp_path: Path) -> Path:
    path = tmp_path / "in.bvh"
    save_bvh(path, chain(), moving_clip(10))
    return path


@pytest.mark.parametrize("argv", [
    ["convert", "IN", "OUT.txt"],
    ["footlock", "IN", "-o", "OUT.txt"],
    ["reach", "IN", "-o", "OUT.txt", "--effector", "tip", "--target", "0,1,0", "--frames", "1:2"],
    ["sample", "walk", "-o", "OUT.txt"],
])
def test_an_output_type_kinema_does_not_write_is_a_usage_error(capsys: pytest.CaptureFixture[str], small_bvh: Path,
                                                                tmp_path: Path, argv: list[str]) -> None:
    subs = {"IN": str(small_bvh), "OUT.txt": str(tmp_path / "out.txt")}
    code, _, err = run(capsys, *[subs.get(a, a) for a in argv])
    assert code == 2
    assert "unknown file type '.txt'" in one_error_line(err)
    assert not (tmp_path / "out.txt").exists()


def test_mesh_with_bvh_output_is_a_usage_error(capsys: pytest.CaptureFixture[str], small_bvh: Path,
                                               tmp_path: Path) -> None:
    for choice in ("keep", "bones", "none"):
        code, _, err = run(capsys, "convert", small_bvh, tmp_path / "o.bvh", "--mesh", choice)
        assert code == 2
        assert "--mesh applies to glTF output" in one_error_line(err)
        assert not (tmp_path / "o.bvh").exists()
    code, _, err = run(capsys, "convert", small_bvh, tmp_path / "o.glb", "--mesh", "none")
    assert code == 0, err


def test_batch_mesh_is_refused_only_when_every_output_is_bvh(capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    src = tmp_path / "mixed"
    src.mkdir()
    save_bvh(src / "a.bvh", chain(), moving_clip(10))
    save_gltf(src / "b.glb", chain(), moving_clip(10))
    code, _, err = run(capsys, "batch", "convert", src, "-o", tmp_path / "bvh", "--to", "bvh", "--mesh", "none",
                       "--workers", "1")
    assert code == 2
    assert "--mesh applies to glTF output" in one_error_line(err)
    assert not (tmp_path / "bvh").exists()
    # outputs in their inputs' formats: --mesh applies to the glTF one
    code, _, err = run(capsys, "batch", "convert", src, "-o", tmp_path / "out", "--mesh", "none", "--workers", "1")
    assert code == 0, err
    assert (tmp_path / "out" / "a.bvh").is_file() and (tmp_path / "out" / "b.glb").is_file()
    assert load_gltf(tmp_path / "out" / "b.glb").mesh is None  # --mesh none was applied


@pytest.mark.parametrize("out, scale, where", [("o.bvh", "1e308", "float64"), ("o.glb", "1e300", "float32")])
def test_an_overflowing_scale_is_one_line_naming_it(capsys: pytest.CaptureFixture[str], small_bvh: Path,
                                                    tmp_path: Path, out: str, scale: str, where: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow warning, if the scale were computed
        code, _, err = run(capsys, "convert", small_bvh, tmp_path / out, "--scale", scale)
    assert code == 1
    line = one_error_line(err)
    assert f"--scale {float(scale):.3g}" in line and where in line
    assert not (tmp_path / out).exists()


def test_a_huge_fps_gives_a_short_line(capsys: pytest.CaptureFixture[str], small_bvh: Path, tmp_path: Path) -> None:
    code, _, err = run(capsys, "convert", small_bvh, tmp_path / "o.bvh", "--fps", "1e300")
    assert code == 1
    line = one_error_line(err)
    assert "at 1e+300 fps" in line and len(line) < 300, line
    # glTF input: the loader's budget message prints the frame count compactly too (it had 300 digits)
    gltf = Path(__file__).parent / "data" / "gltf" / "RiggedSimple.gltf"
    code, _, err = run(capsys, "convert", gltf, tmp_path / "o.glb", "--fps", "1e300")
    assert code == 1
    line = one_error_line(err)
    assert "at 1e+300 fps" in line and "frames" in line and len(line) < 400, line


def test_a_file_name_with_a_line_break_is_printed_on_one_line(capsys: pytest.CaptureFixture[str], small_bvh: Path,
                                                              tmp_path: Path) -> None:
    out = tmp_path / "bad\nname.bvh"
    code, stdout, err = run(capsys, "convert", small_bvh, out)
    assert code == 0, err
    assert out.is_file()
    lines = stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("wrote ") and "bad\\x0aname.bvh" in lines[0]
    code, stdout, err = run(capsys, "sample", "walk", "-o", tmp_path / "walk\n.bvh")
    assert code == 0, err
    assert len(stdout.splitlines()) == 1 and "walk\\x0a.bvh" in stdout
