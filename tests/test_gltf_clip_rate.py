"""A clip's frame rate survives glTF: BVH -> glTF -> BVH keeps the Frame Time.

glTF holds only float32 key times: a BVH at ``Frame Time: 0.033333`` (30.0003 fps) came back from glTF at
30.00030019 fps, ``kinema convert`` wrote ``Frame Time: 0.0333330002708874``, and a one-frame clip came back at
1 fps (``Frame Time: 1.0``).  ``save_gltf`` now keeps an evenly spaced clip's rate in its animation's
``extras.kinema_clip.fps`` and ``load_gltf`` gives the clip back at that rate when the key times are the ones
it wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from _cli import run
from kinema import FileFormatError, Skeleton
from kinema.io import load_bvh, load_gltf, save_bvh, save_gltf
from kinema.pose import Clip, Pose


def _frame_time(path: Path) -> str:
    return next(ln for ln in path.read_text().splitlines() if ln.startswith("Frame Time:"))


def test_bvh_to_gltf_to_bvh_keeps_the_frame_time(capsys: pytest.CaptureFixture[str], shared_data: Path,
                                                 tmp_path: Path) -> None:
    src = shared_data / "bvh" / "bvhtools-test.bvh"
    code, _, err = run(capsys, "convert", src, tmp_path / "a.glb")
    assert code == 0, err
    code, _, err = run(capsys, "convert", tmp_path / "a.glb", tmp_path / "back.bvh")
    assert code == 0, err
    assert _frame_time(tmp_path / "back.bvh") == _frame_time(src) == "Frame Time: 0.033333"
    _, clip = load_bvh(src)
    got = load_gltf(tmp_path / "a.glb").clips["bvhtools-test"]
    assert got.times is None and got.fps == clip.fps and got.n_frames == clip.n_frames


@pytest.mark.parametrize("frames", [1, 2, 7])
def test_short_clips_keep_their_rate(shared_data: Path, tmp_path: Path, frames: int) -> None:
    sk, clip = load_bvh(shared_data / "bvh" / "bvhtools-test.bvh")
    short = Clip(clip.pose[:frames], clip.fps)
    save_gltf(tmp_path / "s.glb", sk, short)
    back = load_gltf(tmp_path / "s.glb")
    got = back.clips["clip"]
    assert got.fps == clip.fps and got.times is None and got.n_frames == frames and back.notes == ()
    save_bvh(tmp_path / "s.bvh", back.skeleton, got)
    save_bvh(tmp_path / "direct.bvh", sk, short)
    assert _frame_time(tmp_path / "s.bvh") == _frame_time(tmp_path / "direct.bvh") == "Frame Time: 0.033333"


def _two_joints() -> Skeleton:
    return Skeleton(["root", "tip"], [-1, 0], [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]])


def _saved(tmp_path: Path, clip: Clip) -> dict:
    save_gltf(tmp_path / "c.gltf", _two_joints(), clip)
    return json.loads((tmp_path / "c.gltf").read_text())


def _moving(n: int, fps: float = 24.0, times: np.ndarray | None = None) -> Clip:
    t = np.zeros((n, 2, 3))
    t[:, 0, 0] = np.arange(n)
    t[:, 1, 1] = 1.0
    return Clip(Pose(t, np.tile([0.0, 0.0, 0.0, 1.0], (n, 2, 1))), fps, times)


def test_clips_with_their_own_times_keep_their_key_times(tmp_path: Path) -> None:
    times = np.array([0.0, 0.1, 0.35, 0.5])
    doc = _saved(tmp_path, _moving(4, times=times))
    assert "kinema_clip" not in doc["animations"][0].get("extras", {})
    got = load_gltf(tmp_path / "c.gltf").clips["clip"]
    assert got.times is not None
    np.testing.assert_array_equal(got.times, times.astype(np.float32).astype(np.float64))


def test_a_rate_whose_keys_a_tool_changed_is_not_used(tmp_path: Path) -> None:
    """Keys edited by another tool (here: saved at 25 fps but labelled 24) keep their times, with a note."""
    doc = _saved(tmp_path, _moving(5, fps=25.0))
    doc["animations"][0]["extras"]["kinema_clip"]["fps"] = 24.0
    (tmp_path / "c.gltf").write_text(json.dumps(doc))
    asset = load_gltf(tmp_path / "c.gltf")
    got = asset.clips["clip"]
    assert got.times is not None and got.fps != 24.0
    assert asset.notes == ("animations[0].extras.kinema_clip: the key times are not k / 24 s; the clip keeps its "
                           "key times",)


@pytest.mark.parametrize("value, where", [
    ("fast", "animations[0].extras.kinema_clip"),
    ({"fps": -1.0}, "animations[0].extras.kinema_clip.fps"),
    ({"fps": True}, "animations[0].extras.kinema_clip.fps"),
    ({"fps": "24"}, "animations[0].extras.kinema_clip.fps"),
    ({}, "animations[0].extras.kinema_clip.fps"),
])
def test_a_malformed_rate_is_a_file_error_at_its_json_path(tmp_path: Path, value: object, where: str) -> None:
    doc = _saved(tmp_path, _moving(3))
    doc["animations"][0]["extras"]["kinema_clip"] = value
    (tmp_path / "c.gltf").write_text(json.dumps(doc))
    with pytest.raises(FileFormatError) as info:
        load_gltf(tmp_path / "c.gltf")
    assert where in str(info.value)


def test_a_requested_rate_resamples_as_before(tmp_path: Path) -> None:
    """``fps=`` still resamples (the kept rate is not used): 5 frames at 4 fps (key times exact in float32) read
    at 2 fps are frames 0, 2 and 4."""
    clip = _moving(5, fps=4.0)
    _saved(tmp_path, clip)
    got = load_gltf(tmp_path / "c.gltf", fps=2.0).clips["clip"]
    assert got.fps == 2.0 and got.times is None and got.n_frames == 3
    np.testing.assert_array_equal(got.pose.translations[:, 0, 0], [0.0, 2.0, 4.0])
