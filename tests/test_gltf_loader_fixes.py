"""load_gltf fixes: STEP / CUBICSPLINE animations with ``fps=None``, the decoding budget's message for absurd
rates, the ``skin=`` argument's type, and primitives that make no triangle.

Every file here is written by the tests as plain glTF JSON with one base64 ``data:`` buffer, so the keys,
interpolations and meshes are known exactly; references (the step and Hermite curves) are computed here by
hand, not by kinema.
"""

from __future__ import annotations

import base64
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _cli import one_error_line, run
from kinema import FileFormatError, SolverInputError
from kinema.io import GltfAsset, load_gltf, save_gltf
from kinema.io.gltf import load as gltf_load

# The documented rates of an animation with STEP / CUBICSPLINE keys loaded with fps=None (frames per second):
# the base rate and the cap on a denser key rate (kinema.io.gltf.load.NONLINEAR_KEYS_FPS / _MAX_FPS).
NONLINEAR_KEYS_FPS = 60.0
NONLINEAR_KEYS_MAX_FPS = 1000.0

# Values and key times are float32 in the files: a round trip keeps them to ~6e-8 relative; the values here
# are at most 5, so 1e-6 absolute holds with margin.
F32_TOL = 1e-6

# STEP keys of the child's translation x (time in seconds, value in file units).
STEP_TIMES = [0.0, 0.5, 2.0]
STEP_VALUES = [1.0, 2.0, 3.0]

# CUBICSPLINE keys of the child's translation x: (in-tangent, value, out-tangent) per key.
CUBIC_TIMES = [0.0, 1.0, 3.0]
CUBIC_ROWS = [(0.0, 0.0, 1.0), (2.0, 1.0, 0.0), (0.0, 5.0, 0.0)]

# Quarter and half turns about z, for the rotation channels (xyzw).
Q0 = [0.0, 0.0, 0.0, 1.0]
Q90 = [0.0, 0.0, float(np.sin(np.pi / 4)), float(np.cos(np.pi / 4))]
Q180 = [0.0, 0.0, 1.0, 0.0]


class _Doc:
    """A glTF document with one embedded buffer: a three-joint skin ``root -> mid -> tip`` (1 unit apart in y)."""

    def __init__(self) -> None:
        self.doc: dict[str, Any] = {
            "asset": {"version": "2.0"}, "scene": 0, "scenes": [{"nodes": [0]}],
            "nodes": [{"name": "root", "children": [1]}, {"name": "mid", "children": [2], "translation": [0, 1, 0]},
                      {"name": "tip", "translation": [0, 1, 0]}],
            "skins": [{"joints": [0, 1, 2]}], "accessors": [], "bufferViews": [], "animations": []}
        self.data = bytearray()

    def accessor(self, arr: Any, typ: str, ct: int = 5126) -> int:
        dt = {5126: "<f4", 5123: "<u2", 5121: "<u1"}[ct]
        raw = np.ascontiguousarray(np.asarray(arr), dtype=dt).tobytes()
        self.doc["bufferViews"].append({"buffer": 0, "byteOffset": len(self.data), "byteLength": len(raw)})
        self.data += raw + b"\0" * (-len(raw) % 4)
        self.doc["accessors"].append({"bufferView": len(self.doc["bufferViews"]) - 1, "componentType": ct,
                                      "count": int(np.asarray(arr).shape[0]), "type": typ})
        return len(self.doc["accessors"]) - 1

    def animation(self, name: str, *channels: tuple[int, str, list[float], Any, str]) -> None:
        """Channels ``(node, path, key times, output rows, interpolation)``."""
        samplers, chans = [], []
        for node, path, times, rows, interp in channels:
            typ = "VEC4" if path == "rotation" else "VEC3"
            samplers.append({"input": self.accessor(np.reshape(times, (-1, 1)), "SCALAR"),
                             "output": self.accessor(rows, typ), "interpolation": interp})
            chans.append({"sampler": len(samplers) - 1, "target": {"node": node, "path": path}})
        self.doc["animations"].append({"name": name, "samplers": samplers, "channels": chans})

    def write(self, path: Path) -> Path:
        doc = dict(self.doc)
        uri = "data:application/octet-stream;base64," + base64.b64encode(bytes(self.data)).decode()
        doc["buffers"] = [{"byteLength": len(self.data), "uri": uri}]
        path.write_text(json.dumps(doc))
        return path


def _tip_x(times: list[float], values: list[float], interp: str) -> tuple[int, str, list[float], Any, str]:
    """A translation channel of the tip moving along x (y stays 1, its rest offset)."""
    return 2, "translation", times, [[v, 1.0, 0.0] for v in values], interp


def _step_file(path: Path) -> Path:
    d = _Doc()
    d.animation("step", _tip_x(STEP_TIMES, STEP_VALUES, "STEP"),
                (1, "rotation", [0.0, 1.0], [Q0, Q90], "STEP"))
    return d.write(path)


def _cubic_file(path: Path) -> Path:
    d = _Doc()
    rows = [[c, 1.0 if k == 1 else 0.0, 0.0] for key in CUBIC_ROWS for k, c in enumerate(key)]
    # Rotation: zero tangents between a quarter and a half turn (eased; normalised by the loader).
    rot = [[0, 0, 0, 0], Q90, [0, 0, 0, 0], [0, 0, 0, 0], Q180, [0, 0, 0, 0]]
    d.animation("cubic", (2, "translation", CUBIC_TIMES, rows, "CUBICSPLINE"),
                (1, "rotation", [0.0, 2.0], rot, "CUBICSPLINE"))
    return d.write(path)


def _hand_step(t: np.ndarray) -> np.ndarray:
    """The STEP keys at times ``t``: the key at or before t (the first one before it)."""
    i = np.clip(np.searchsorted(STEP_TIMES, t, side="right") - 1, 0, len(STEP_TIMES) - 1)
    return np.asarray(STEP_VALUES)[i]


def _hand_cubic(t: np.ndarray) -> np.ndarray:
    """The CUBICSPLINE keys at times ``t`` (glTF 2.0 spec, Appendix C: Hermite, tangents scaled by the key gap)."""
    out = np.empty_like(t)
    for n, x in enumerate(t):
        k = min(int(np.searchsorted(CUBIC_TIMES, x, side="right")) - 1, len(CUBIC_TIMES) - 2)
        d = CUBIC_TIMES[k + 1] - CUBIC_TIMES[k]
        u = (x - CUBIC_TIMES[k]) / d
        v0, b0 = CUBIC_ROWS[k][1], CUBIC_ROWS[k][2]
        a1, v1 = CUBIC_ROWS[k + 1][0], CUBIC_ROWS[k + 1][1]
        out[n] = ((2 * u**3 - 3 * u**2 + 1) * v0 + (u**3 - 2 * u**2 + u) * d * b0
                  + (-2 * u**3 + 3 * u**2) * v1 + (u**3 - u**2) * d * a1)
    return out


def _assert_same_motion(got: GltfAsset, want: GltfAsset, name: str) -> None:
    """Clip ``name`` of ``got`` has ``want``'s frames (times and every joint's local TRS) to :data:`F32_TOL`."""
    g, w = got.clips[name], want.clips[name]
    assert g.n_frames == w.n_frames
    g_times = g.times if g.times is not None else np.arange(g.n_frames) / g.fps
    np.testing.assert_allclose(g_times, np.arange(w.n_frames) / w.fps, rtol=0, atol=F32_TOL)
    assert got.skeleton.names == want.skeleton.names
    np.testing.assert_allclose(g.pose.translations, w.pose.translations, rtol=0, atol=F32_TOL)
    np.testing.assert_allclose(g.pose.scales, w.pose.scales, rtol=0, atol=F32_TOL)
    gq, wq = g.pose.rotations, w.pose.rotations
    sign = np.where(np.sum(gq * wq, axis=-1, keepdims=True) < 0, -1.0, 1.0)  # q and -q: the same rotation
    np.testing.assert_allclose(gq * sign, wq, rtol=0, atol=F32_TOL)


# ============================================================ 1. STEP / CUBICSPLINE with fps=None
@pytest.mark.parametrize("make, name, t_end, hand", [(_step_file, "step", 2.0, _hand_step),
                                                     (_cubic_file, "cubic", 3.0, _hand_cubic)])
def test_nonlinear_keys_resampled_and_kept_by_save(tmp_path: Path, make: Any, name: str, t_end: float,
                                                   hand: Any) -> None:
    src = make(tmp_path / f"{name}.gltf")
    a = load_gltf(src)  # fps=None
    clip = a.clips[name]
    # Resampled at the base rate from t = 0 (the keys here are sparser than that).
    assert clip.times is None and clip.fps == NONLINEAR_KEYS_FPS
    n = int(round(t_end * NONLINEAR_KEYS_FPS)) + 1
    assert clip.n_frames == n
    t = np.arange(n) / NONLINEAR_KEYS_FPS
    np.testing.assert_allclose(clip.pose.translations[:, 2, 0], hand(t), rtol=0, atol=F32_TOL)
    # ... the file's own sampling at that rate, and a note says so.
    own = load_gltf(src, fps=NONLINEAR_KEYS_FPS)
    _assert_same_motion(a, own, name)
    assert (gltf_load.NONLINEAR_KEYS_FPS, gltf_load.NONLINEAR_KEYS_MAX_FPS) == (60.0, 1000.0)
    interp = "STEP" if name == "step" else "CUBICSPLINE"
    assert a.notes == (f"animations[0] ({name!r}): {interp} keys resampled at 60 fps ({n} frames from t = 0): "
                       "kinema clips interpolate linearly between frames",)
    # Saved (LINEAR keys at the frames) and read back: the same motion at the same times.
    out = tmp_path / f"{name}.glb"
    save_gltf(out, a.skeleton, a.clips)
    back = load_gltf(out)
    assert back.clips[name].times is None and back.clips[name].fps == a.clips[name].fps and back.notes == ()
    _assert_same_motion(back, own, name)


@pytest.mark.parametrize("name", ["step", "cubic"])
def test_convert_keeps_nonlinear_motion(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    src = (_step_file if name == "step" else _cubic_file)(tmp_path / f"{name}.gltf")
    out = tmp_path / f"{name}.glb"
    code, _, err = run(capsys, "convert", src, out)
    assert code == 0, err
    _assert_same_motion(load_gltf(out), load_gltf(src, fps=NONLINEAR_KEYS_FPS), name)


def test_linear_animation_keeps_key_times_beside_a_step_one(tmp_path: Path) -> None:
    d = _Doc()
    d.animation("lin", _tip_x([0.0, 0.25, 1.0], [0.0, 1.0, 4.0], "LINEAR"))
    d.animation("hold", _tip_x(STEP_TIMES, STEP_VALUES, "STEP"))
    a = load_gltf(d.write(tmp_path / "two.gltf"))
    lin, hold = a.clips["lin"], a.clips["hold"]
    # LINEAR only: exactly its key times (exact in float32) and values, as before.
    assert lin.times is not None
    np.testing.assert_array_equal(lin.times, [0.0, 0.25, 1.0])
    np.testing.assert_array_equal(lin.pose.translations[:, 2, 0], [0.0, 1.0, 4.0])
    assert lin.fps == 2.0
    # The STEP animation beside it is resampled; the one note names it (animations[1]), not the other.
    assert hold.times is None and hold.fps == NONLINEAR_KEYS_FPS and hold.n_frames == 121
    assert len(a.notes) == 1 and a.notes[0].startswith("animations[1] ('hold'): STEP keys resampled at 60 fps")


@pytest.mark.parametrize("key_gap, rate", [(1.0 / 128, 128.0), (1.0 / 4096, NONLINEAR_KEYS_MAX_FPS)])
def test_denser_keys_set_a_finer_rate_up_to_the_cap(tmp_path: Path, key_gap: float, rate: float) -> None:
    # STEP keys every key_gap seconds (powers of two: exact in float32) for 16 keys.
    times = [k * key_gap for k in range(16)]
    d = _Doc()
    d.animation("dense", _tip_x(times, [float(k % 2) for k in range(16)], "STEP"))
    src = d.write(tmp_path / "dense.gltf")
    a = load_gltf(src)
    clip = a.clips["dense"]
    assert clip.times is None and clip.fps == rate
    assert clip.n_frames == int(np.ceil(times[-1] * rate - 1e-9)) + 1
    assert f"resampled at {rate:g} fps" in a.notes[0]
    _assert_same_motion(a, load_gltf(src, fps=rate), "dense")
    if rate == 128.0:  # every key is a frame: the steps' values alternate frame by frame
        np.testing.assert_array_equal(clip.pose.translations[:, 2, 0], [k % 2 for k in range(16)])


def test_finer_rate_that_does_not_fit_the_budget_falls_back(tmp_path: Path) -> None:
    # A STEP channel keyed 2**-10 s apart (capped at 1000 fps) in a 200 s animation: 200,001 frames of 3 joints
    # would take 144 MB, more than the ~64 MB budget of this small file; 60 fps (12,001 frames) fits.
    d = _Doc()
    d.animation("long", _tip_x([0.0, 2.0**-10], [0.0, 1.0], "STEP"),
                (0, "translation", [0.0, 200.0], [[0, 0, 0], [2, 0, 0]], "LINEAR"))
    a = load_gltf(d.write(tmp_path / "long.gltf"))
    clip = a.clips["long"]
    assert clip.fps == NONLINEAR_KEYS_FPS and clip.n_frames == 12001
    np.testing.assert_allclose(clip.pose.translations[[0, 6000, 12000], 0, 0], [0.0, 1.0, 2.0], rtol=0,
                               atol=F32_TOL)
    assert "resampled at 60 fps (12001 frames" in a.notes[0]


def test_nonlinear_resampling_beyond_the_budget_is_a_file_error(tmp_path: Path) -> None:
    # STEP keys a million seconds apart: 60 fps would need 6e7 frames (43 GB); refused before allocating.
    d = _Doc()
    d.animation("eons", _tip_x([0.0, 1e6], [0.0, 1.0], "STEP"))
    src = d.write(tmp_path / "eons.gltf")
    with pytest.raises(FileFormatError, match=r"animations\[0\].*60 fps.*STEP keys \(pass fps= for another rate\)"
                       ) as e:
        load_gltf(src)
    assert str(src) in str(e.value)
    assert load_gltf(src, fps=1e-3).clips["eons"].n_frames == 1001  # an explicit rate still reads it


# ============================================================ 2. absurd rates: the budget's error
def test_absurd_fps_is_a_file_error(tmp_path: Path) -> None:
    d = _Doc()
    d.animation("lin", _tip_x([0.0, 1.0], [0.0, 1.0], "LINEAR"))
    src = d.write(tmp_path / "lin.gltf")
    # (fps + 1) frames x 3 joints x 240 bytes: the last two are past float64's range (~1.8e308).
    for fps, need in ((1e305, 72 * 10**306), (1e306, 72 * 10**307), (1.5e308, 108 * 10**309)):
        with pytest.raises(FileFormatError, match=r"at animations\[0\]: resampling 1 s at") as e:
            load_gltf(src, fps=fps)
        assert str(src) in str(e.value)
        said = re.search(r"needs ([0-9.e+]+) bytes, more than this file may decode", str(e.value))
        assert said is not None
        # printed to three significant digits: within half a unit of the third
        assert abs(Decimal(said.group(1)) / need - 1) <= Decimal("5e-3")


def test_cli_convert_absurd_fps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _Doc()
    d.animation("lin", _tip_x([0.0, 1.0], [0.0, 1.0], "LINEAR"))
    src = d.write(tmp_path / "lin.gltf")
    out = tmp_path / "x.bvh"
    code, _, err = run(capsys, "convert", src, out, "--fps", "1e306")
    assert code == 1
    line = one_error_line(err)
    assert str(src) in line and "animations[0]" in line and "int too large" not in line
    assert not out.exists()


# ============================================================ 3. skin=
def _two_skins(path: Path) -> Path:
    d = _Doc()
    d.doc["skins"] = [{"joints": [0, 1, 2], "name": "all"}, {"joints": [1, 2], "name": "arm"}]
    return d.write(path)


@pytest.mark.parametrize("skin", [[0], (1,), True, False, np.True_, 1.5, np.float64(1.0), 1 + 0j, b"arm", object()])
def test_skin_of_another_type_is_refused(tmp_path: Path, skin: Any) -> None:
    src = _two_skins(tmp_path / "s.gltf")
    with pytest.raises(SolverInputError, match=r"load_gltf: skin must be a skin index \(int\), a skin name \(str\) "
                                               rf"or None, got .* \({type(skin).__name__}\)"):
        load_gltf(src, skin=skin)


def test_skin_numpy_integers_and_names_read_the_skin(tmp_path: Path) -> None:
    src = _two_skins(tmp_path / "s.gltf")
    for skin in (1, np.int64(1), np.uint8(1), np.int32(1), "arm"):
        a = load_gltf(src, skin=skin)
        assert a.skin == 1 and type(a.skin) is int and a.skeleton.names == ("mid", "tip")
    assert load_gltf(src, skin=np.int16(0)).skeleton.names == ("root", "mid", "tip")
    with pytest.raises(FileFormatError, match=r"at skins: no skin 2 \(the file has 2 skins\)"):
        load_gltf(src, skin=np.int64(2))
    with pytest.raises(SolverInputError, match=r"got np\.True_"):
        load_gltf(src, skin=np.True_)


# ============================================================ 4. primitives without a triangle
def _mesh_file(path: Path, *, with_triangles: bool) -> Path:
    """A skinned mesh: (optionally) a quad of two TRIANGLES, then a TRIANGLE_STRIP of 2 indices (no triangle)."""
    d = _Doc()
    prims = []
    if with_triangles:
        quad = [[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]]
        prims.append({"attributes": {"POSITION": d.accessor(quad, "VEC3"),
                                     "JOINTS_0": d.accessor([[0, 1, 0, 0]] * 4, "VEC4", 5121),
                                     "WEIGHTS_0": d.accessor([[0.5, 0.5, 0, 0]] * 4, "VEC4")},
                      "indices": d.accessor([0, 1, 2, 2, 1, 3], "SCALAR", 5123)})
    prims.append({"attributes": {"POSITION": d.accessor([[5, 5, 5], [6, 5, 5]], "VEC3"),
                                 "JOINTS_0": d.accessor([[2, 0, 0, 0]] * 2, "VEC4", 5121),
                                 "WEIGHTS_0": d.accessor([[1, 0, 0, 0]] * 2, "VEC4")},
                  "indices": d.accessor([0, 1], "SCALAR", 5123), "mode": 5})
    d.doc["meshes"] = [{"name": "m", "primitives": prims}]
    d.doc["nodes"].append({"name": "skinned", "mesh": 0, "skin": 0})
    d.doc["scenes"][0]["nodes"].append(3)
    return d.write(path)


def test_strip_without_triangles_is_dropped_and_saves(tmp_path: Path) -> None:
    a = load_gltf(_mesh_file(tmp_path / "strip.gltf", with_triangles=True))
    assert a.notes == ("meshes[0].primitives[1]: mode 5 with 2 indices makes no triangle; skipped",)
    assert a.mesh is not None
    # Only the quad: its 4 vertices and 2 triangles, none of the strip's vertices.
    np.testing.assert_array_equal(a.mesh.positions, [[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]])
    np.testing.assert_array_equal(a.mesh.indices, [[0, 1, 2], [2, 1, 3]])
    out = tmp_path / "strip.glb"
    save_gltf(out, a.skeleton, a.clips, mesh=a.mesh)
    back = load_gltf(out)
    assert back.mesh is not None and back.notes == ()
    np.testing.assert_array_equal(back.mesh.positions, a.mesh.positions)
    np.testing.assert_array_equal(back.mesh.indices, a.mesh.indices)
    np.testing.assert_array_equal(back.mesh.weights, a.mesh.weights)


def test_mesh_of_only_a_degenerate_strip_loads_without_mesh_and_converts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _mesh_file(tmp_path / "only.gltf", with_triangles=False)
    a = load_gltf(src)
    assert a.mesh is None
    assert a.notes == ("meshes[0].primitives[0]: mode 5 with 2 indices makes no triangle; skipped",)
    out = tmp_path / "only.glb"
    save_gltf(out, a.skeleton, a.clips, mesh=a.mesh)
    back = load_gltf(out)
    assert back.mesh is None and back.skeleton.names == a.skeleton.names
    code, _, err = run(capsys, "convert", src, tmp_path / "conv.glb")
    assert code == 0, err
    assert load_gltf(tmp_path / "conv.glb").skeleton.names == ("root", "mid", "tip")


# ------------------------------------------------------------- an accessor of the wrong type for its use
def test_wrong_accessor_type_is_named_before_its_data_is_read(tmp_path: Path) -> None:
    """Key times declared VEC2 over a buffer that holds them as SCALARs: the error is the type (what the file
    got wrong), not the count that reading them as VEC2 would overrun."""
    d = _Doc()
    d.animation("walk", _tip_x(STEP_TIMES, STEP_VALUES, "LINEAR"))
    times = d.doc["animations"][0]["samplers"][0]["input"]
    d.doc["accessors"][times]["type"] = "VEC2"  # 3 floats in the view: 3 VEC2 elements would need 24 bytes
    with pytest.raises(FileFormatError, match=re.escape(f"accessors[{times}].type: is VEC2 but "
                                                        "animations[0].samplers[0].input needs SCALAR")):
        load_gltf(d.write(tmp_path / "vec2_times.gltf"))
    d.doc["accessors"][times]["type"] = "SCALAR"
    d.doc["accessors"][times]["componentType"] = 5123  # unsigned short key times: the spec allows float only
    with pytest.raises(FileFormatError, match=re.escape(f"accessors[{times}].componentType: is 5123 but "
                                                        "animations[0].samplers[0].input needs one of [5126]")):
        load_gltf(d.write(tmp_path / "ushort_times.gltf"))
