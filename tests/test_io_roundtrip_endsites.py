"""BVH -> glTF -> BVH keeps the BVH file layout: End Sites stay End Sites, every joint keeps its channels.

save_gltf writes each joint's BVH layout (``skeleton.meta["bvh_channels"]`` / ``["bvh_end_site"]``) into its
node's ``extras.kinema_bvh``; load_gltf restores it, and a glTF file without it loads as before.

References are independent of kinema: the HIERARCHY of the original file and of the re-written file are
parsed here with plain string handling, and the glTF JSON is read with ``json``.

Tolerances (glTF stores animation values as float32, rounded by at most 2**-24 of each value):

* OFFSETs go through the JSON as float64 decimals, exactly; the re-written file prints them with 6
  decimals, so they match the original text to half a unit of the 6th decimal (:data:`OFFSET_ATOL`).
* Rotations: a float32 quaternion is off by at most 2**-23 in norm, a rotation of 2**-22 rad
  (2.4e-7); the 6-decimal degrees of both files add < 3e-8 rad: :data:`ROTATION_ATOL_RAD`.
* Translations: float32 rounding of |t| up to 2**-24 |t|, plus the 5e-7 of the 6-decimal text of
  both files: :data:`TRANSLATION_RTOL` and :data:`TRANSLATION_ATOL`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kinema
from _io_mutate import GOOD_BVH
from kinema import FileFormatError, Skeleton
from kinema.io import load_bvh, load_gltf, save_bvh, save_gltf

pytest.importorskip("pygltflib")

#: Half a unit of the 6th decimal (the writer's default precision), plus float64 noise of the parse.
OFFSET_ATOL = 5.0e-7 + 1e-12
#: float32 quaternion rounding (2**-22 rad) with a 2x margin, plus the 6-decimal text of both files.
ROTATION_ATOL_RAD = 2 * 2.0**-22 + 3e-8
#: float32 rounding of a value (2**-24 of it) with a 2x margin.
TRANSLATION_RTOL = 2 * 2.0**-24
#: The 6-decimal text of both files (5e-7 each).
TRANSLATION_ATOL = 1e-6

REAL_FILES = ["test_mocapbank.bvh", "bvhtools-test.bvh", "bvhtools-test2.bvh", "bvhtools-test3.bvh"]


# ------------------------------------------------------------------ helpers
def hierarchy(text: str) -> list[tuple[str, str | None, tuple[float, float, float], tuple[str, ...], int]]:
    """The HIERARCHY of a BVH text, independent of kinema: per block ``(kind, name, offset, channels, depth)``,
    ``kind`` "ROOT", "JOINT" or "End Site" (``name`` None), in file order."""
    out: list[Any] = []
    depth = 0
    head = text.split("MOTION", 1)[0]
    for raw in head.splitlines():
        line = raw.strip()
        if not line or line == "HIERARCHY":
            continue
        if line == "{":
            depth += 1
        elif line == "}":
            depth -= 1
        elif line.startswith(("ROOT ", "JOINT ")):
            kind, name = line.split(None, 1)
            out.append([kind, name, None, (), depth])
        elif line == "End Site":
            out.append(["End Site", None, None, (), depth])
        elif line.startswith("OFFSET"):
            out[-1][2] = tuple(float(x) for x in line.split()[1:])
        elif line.startswith("CHANNELS"):
            parts = line.split()
            assert int(parts[1]) == len(parts) - 2
            out[-1][3] = tuple(parts[2:])
        else:
            raise AssertionError(f"unexpected hierarchy line {line!r}")
    return [tuple(b) for b in out]


def frame_time(text: str) -> float:
    m = re.search(r"Frame Time:\s*(\S+)", text)
    assert m is not None
    return float(m.group(1))


def assert_same_layout(original: str, again: str) -> None:
    """Same blocks (kinds, names, depths, channel lists, End Sites), OFFSETs equal to the text precision."""
    a, b = hierarchy(original), hierarchy(again)
    assert [(k, n, c, d) for k, n, _, c, d in b] == [(k, n, c, d) for k, n, _, c, d in a]
    np.testing.assert_allclose([o for _, _, o, _, _ in b], [o for _, _, o, _, _ in a], rtol=0, atol=OFFSET_ATOL)


def assert_same_motion(sk_a: Skeleton, clip_a: kinema.Clip, sk_b: Skeleton, clip_b: kinema.Clip) -> None:
    assert sk_b.names == sk_a.names and clip_b.n_frames == clip_a.n_frames
    ta, tb = clip_a.pose.translations, clip_b.pose.translations
    np.testing.assert_allclose(tb, ta, rtol=TRANSLATION_RTOL, atol=TRANSLATION_ATOL)
    dots = np.abs(np.sum(clip_a.pose.rotations * clip_b.pose.rotations, axis=-1))
    angle = 2.0 * np.arccos(np.clip(dots, 0.0, 1.0))
    assert float(angle.max()) <= ROTATION_ATOL_RAD


def through_gltf(sk: Skeleton, clip: kinema.Clip, path: Path) -> tuple[Skeleton, kinema.Clip]:
    save_gltf(path, sk, {"take": clip})
    asset = load_gltf(path)
    return asset.skeleton, asset.clips["take"]


# ------------------------------------------------------------------ the round trip
@pytest.mark.parametrize("name", REAL_FILES)
def test_real_files_keep_end_sites_and_channels_through_gltf(shared_data: Path, tmp_path: Path, name: str) -> None:
    src = shared_data / "bvh" / name
    sk, clip = load_bvh(src)
    assert sum(sk.meta["bvh_end_site"]) >= 5  # every file here has End Sites
    sk2, clip2 = through_gltf(sk, clip, tmp_path / "mid.glb")
    assert sk2.meta["bvh_end_site"] == sk.meta["bvh_end_site"]
    assert sk2.meta["bvh_channels"] == sk.meta["bvh_channels"]
    out = tmp_path / "again.bvh"
    save_bvh(out, sk2, clip2)
    original, again = src.read_text(), out.read_text()
    assert_same_layout(original, again)
    assert again.count("End Site") == original.count("End Site")
    assert frame_time(again) == pytest.approx(frame_time(original), rel=2.0**-23)
    sk3, clip3 = load_bvh(out)
    assert_same_motion(sk, clip, sk3, clip3)


def test_walk_sample_through_gltf_text_file(tmp_path: Path) -> None:
    """The bundled walk sample, through a ``.gltf`` (JSON) file this time: the same file layout comes back."""
    src = tmp_path / "walk.bvh"
    kinema.samples.save_sample_bvh(src, "walk")
    sk, clip = load_bvh(src)
    sk2, clip2 = through_gltf(sk, clip, tmp_path / "mid.gltf")
    out = tmp_path / "again.bvh"
    save_bvh(out, sk2, clip2)
    assert_same_layout(src.read_text(), out.read_text())
    sk3, clip3 = load_bvh(out)
    assert_same_motion(sk, clip, sk3, clip3)


def test_partial_channels_are_not_widened_by_float32_rounding(tmp_path: Path, rng: np.random.Generator) -> None:
    """Joints with two or one rotation channels and one position channel: the glTF's float32 values leave the
    missing axes off by rounding only (~1e-5 degrees, ~1e-7 of a length, any angle near the gimbal lock),
    which is no motion to write."""
    frames = 40
    rows = np.concatenate([rng.uniform(-50, 50, (frames, 3)), rng.uniform(-170, 170, (frames, 3)),  # root: 6
                           rng.uniform(-1.5, 1.5, (frames, 1)),  # Leg: Yposition
                           rng.uniform(-80, 80, (frames, 2)),  # Leg: Zrotation Xrotation
                           rng.uniform(-170, 170, (frames, 1))], axis=1)  # Foot: Yrotation
    # Leg's X at and near the gimbal lock (+-90): Euler angles of the float32 rotation split Z and the missing Y
    # as rounding decides.
    rows[::4, 8] = 90.0 + rng.uniform(-0.3, 0.3, rows[::4].shape[0])
    rows[1::4, 8] = -90.0 + rng.uniform(-0.3, 0.3, rows[1::4].shape[0])
    rows[2, 8] = 90.0
    text = ("HIERARCHY\nROOT Hips\n{\n  OFFSET 0.5 91.25 -3.75\n"
            "  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation\n"
            "  JOINT Leg\n  {\n    OFFSET 10.548509 -41.3 0.25\n    CHANNELS 3 Yposition Zrotation Xrotation\n"
            "    JOINT Foot\n    {\n      OFFSET 0 -42.372192 1.5\n      CHANNELS 1 Yrotation\n"
            "      End Site\n      {\n        OFFSET 0 -3 17.299999\n      }\n    }\n  }\n}\n"
            f"MOTION\nFrames: {frames}\nFrame Time: 0.04\n"
            + "".join(" ".join(f"{v:.6f}" for v in row) + "\n" for row in rows))
    src = tmp_path / "partial.bvh"
    src.write_text(text)
    sk, clip = load_bvh(src)
    sk2, clip2 = through_gltf(sk, clip, tmp_path / "mid.glb")
    out = tmp_path / "again.bvh"
    save_bvh(out, sk2, clip2)
    assert_same_layout(text, out.read_text())
    sk3, clip3 = load_bvh(out)
    assert_same_motion(sk, clip, sk3, clip3)


def test_two_joint_file_through_gltf_and_gltf_again(tmp_path: Path) -> None:
    """A re-saved glTF keeps the layout too (glTF -> glTF -> BVH)."""
    src = tmp_path / "good.bvh"
    src.write_text(GOOD_BVH)
    sk, clip = load_bvh(src)
    sk2, clip2 = through_gltf(sk, clip, tmp_path / "one.gltf")
    sk3, clip3 = through_gltf(sk2, clip2, tmp_path / "two.glb")
    out = tmp_path / "again.bvh"
    save_bvh(out, sk3, clip3)
    assert_same_layout(GOOD_BVH, out.read_text())
    assert hierarchy(out.read_text())[-1][:2] == ("End Site", None)


# ------------------------------------------------------------------ what the glTF holds
def test_extras_hold_the_layout_per_joint_node(tmp_path: Path) -> None:
    src = tmp_path / "good.bvh"
    src.write_text(GOOD_BVH)
    sk, clip = load_bvh(src)
    save_gltf(tmp_path / "g.gltf", sk, clip)
    nodes = json.loads((tmp_path / "g.gltf").read_text())["nodes"]
    got = {n["name"]: n.get("extras") for n in nodes[: sk.n_joints]}
    assert got == {
        "Hips": {"kinema_bvh": {"channels": ["Xposition", "Yposition", "Zposition",
                                             "Zrotation", "Xrotation", "Yrotation"], "end_site": False}},
        "Leg": {"kinema_bvh": {"channels": ["Zrotation", "Xrotation", "Yrotation"], "end_site": False}},
        # pygltflib leaves empty arrays out of the JSON: no "channels" is no channels
        "Leg_End": {"kinema_bvh": {"end_site": True}},
    }


def test_skeletons_not_read_from_bvh_write_no_extras(tmp_path: Path) -> None:
    sk = kinema.samples.humanoid()
    save_gltf(tmp_path / "h.gltf", sk, kinema.samples.clip("walk"))
    assert not any("extras" in n for n in json.loads((tmp_path / "h.gltf").read_text())["nodes"])
    assert "bvh_channels" not in load_gltf(tmp_path / "h.gltf").skeleton.meta


# ------------------------------------------------------------------ files without (or with broken) layouts
def _good_gltf(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    src = tmp_path / "good.bvh"
    src.write_text(GOOD_BVH)
    sk, clip = load_bvh(src)
    path = tmp_path / "g.gltf"
    save_gltf(path, sk, clip)
    return path, json.loads(path.read_text())


def _write(tmp_path: Path, doc: dict[str, Any], name: str = "edited.gltf") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _same_asset(a: kinema.io.GltfAsset, b: kinema.io.GltfAsset) -> None:
    assert a.skeleton.names == b.skeleton.names and a.notes == b.notes
    np.testing.assert_array_equal(a.skeleton.parents, b.skeleton.parents)
    np.testing.assert_array_equal(a.skeleton.translations, b.skeleton.translations)
    np.testing.assert_array_equal(a.skeleton.rotations, b.skeleton.rotations)
    assert set(a.skeleton.meta) == set(b.skeleton.meta)
    assert a.clips.keys() == b.clips.keys()
    for k in a.clips:
        np.testing.assert_array_equal(a.clips[k].pose.rotations, b.clips[k].pose.rotations)


@pytest.mark.parametrize("file", ["RiggedSimple.gltf", "RiggedFigure.gltf"])
def test_other_tools_files_load_without_a_bvh_layout(shared_data: Path, tmp_path: Path, file: str) -> None:
    """Files from other tools carry no kinema_bvh: no layout in meta, and extras of their own change nothing."""
    path = shared_data / "gltf" / file
    asset = load_gltf(path)
    assert {"bvh_channels", "bvh_end_site"}.isdisjoint(asset.skeleton.meta)
    doc = json.loads(path.read_text())
    for i, node in enumerate(doc["nodes"]):  # extras are any JSON value (glTF 2.0): none of them is kinema's
        node["extras"] = [{"extras": 1}, "text", {"kinema": {"channels": 3}}, 7, None][i % 5]
    other = load_gltf(_write(tmp_path, doc))
    assert {"bvh_channels", "bvh_end_site"}.isdisjoint(other.skeleton.meta)
    _same_asset(asset, other)


def test_a_layout_on_only_some_joints_is_not_restored(tmp_path: Path) -> None:
    path, doc = _good_gltf(tmp_path)
    del doc["nodes"][1]["extras"]
    asset = load_gltf(_write(tmp_path, doc))
    assert "bvh_channels" not in asset.skeleton.meta and "bvh_end_site" not in asset.skeleton.meta
    assert any("nodes[1]" in n and "kinema_bvh" in n and "not restored" in n for n in asset.notes)


@pytest.mark.parametrize(("value", "where", "message"), [
    ("Xrotation", r"nodes\[1\]\.extras\.kinema_bvh", "must be an object"),
    ({"channels": "Xrotation"}, r"nodes\[1\]\.extras\.kinema_bvh\.channels", "must be an array"),
    ({"channels": ["Xrotation", 3]}, r"nodes\[1\]\.extras\.kinema_bvh\.channels\[1\]", "must be a string"),
    ({"channels": ["Xrotation\nROOT x"]}, r"nodes\[1\]\.extras\.kinema_bvh\.channels", "unknown channel"),
    ({"channels": ["Wrotation"]}, r"nodes\[1\]\.extras\.kinema_bvh\.channels", "unknown channel 'Wrotation'"),
    ({"channels": ["Xrotation", "xROTATION"]}, r"nodes\[1\]\.extras\.kinema_bvh\.channels", "listed twice"),
    ({"channels": [], "end_site": 1}, r"nodes\[1\]\.extras\.kinema_bvh\.end_site", "must be true or false"),
])
def test_broken_layouts_name_their_json_path(tmp_path: Path, value: Any, where: str, message: str) -> None:
    """The channel names would be written into a BVH file: a layout that is not one is refused, not written."""
    path, doc = _good_gltf(tmp_path)
    doc["nodes"][1]["extras"] = {"kinema_bvh": value}
    with pytest.raises(FileFormatError, match=f"edited.gltf at {where}: .*{message}"):
        load_gltf(_write(tmp_path, doc))
