"""BVH in and out: synthetic files for every channel order, the real mocap file, bvhio cross-check,
round trips, units and axes, bad files, a fuzz test and the no-JIT path."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kinema
from _io_mutate import GOOD_BVH, small_capture
from kinema import Clip, FileFormatError, Pose, ShapeError, Skeleton, SkeletonError, forward_kinematics
from kinema import rotation as R
from kinema.io import load_bvh, save_bvh

ROOT_DIR = Path(__file__).resolve().parents[1]

#: bvhio computes with glm float32; its world positions of the real file (metres
#: of up to ~300 cm) carry ~5e-5 of rounding, inside the issue's 1e-4.
BVHIO_ATOL = 1e-4

#: Text precision of save_bvh's default 6 decimals: positions to 5e-7 file units,
#: angles to 5e-7 degrees, which moves unit quaternions by < 1e-8.
ROUND_TRIP_ATOL = 1e-6

PERMUTATIONS = ["".join(p) for p in itertools.permutations("XYZ")]


# ------------------------------------------------------------------ helpers
def layout(sk: Skeleton) -> dict[str, Any]:
    """``sk.meta`` less ``"source"`` (the path read): the file layout a save keeps."""
    return {k: v for k, v in sk.meta.items() if k != "source"}


def real_file(shared_data: Path) -> Path:
    return shared_data / "bvh" / "test_mocapbank.bvh"


def elementary(axis: str, deg: np.ndarray) -> np.ndarray:
    """3x3 rotation matrices about ``axis`` by ``deg`` degrees, ``(..., 3, 3)`` (independent of kinema)."""
    a = np.deg2rad(deg)
    c, s = np.cos(a), np.sin(a)
    m = np.zeros(np.shape(a) + (3, 3))
    i = "XYZ".index(axis)
    j, k = (i + 1) % 3, (i + 2) % 3
    m[..., i, i] = 1.0
    m[..., j, j] = c
    m[..., k, k] = c
    m[..., k, j] = s
    m[..., j, k] = -s
    return m


class Joint:
    def __init__(self, name: str, parent: int, offset: tuple[float, float, float], channels: list[str],
                 end_site: bool = False) -> None:
        self.name, self.parent, self.offset, self.channels, self.end_site = name, parent, offset, channels, end_site


def bvh_text(joints: list[Joint], values: np.ndarray, frame_time: float = 1 / 30, nl: str = "\n",
             indent: str = "\t", fmt: str = "%.6f") -> str:
    """A BVH file for ``joints`` (depth-first, parents first) and motion ``values`` ``(F, C)``."""
    kids: dict[int, list[int]] = {i: [] for i in range(-1, len(joints))}
    for i, j in enumerate(joints):
        kids[j.parent].append(i)
    out = ["HIERARCHY"]

    def emit(i: int, depth: int) -> None:
        j = joints[i]
        pad = indent * depth
        if j.end_site:
            out.append(f"{pad}End Site")
        else:
            out.append(f"{pad}{'ROOT' if j.parent < 0 else 'JOINT'} {j.name}")
        out.append(pad + "{")
        out.append(f"{pad}{indent}OFFSET " + " ".join(fmt % v for v in j.offset))
        if not j.end_site:
            out.append(f"{pad}{indent}CHANNELS {len(j.channels)} " + " ".join(j.channels))
        for k in kids[i]:
            emit(k, depth + 1)
        out.append(pad + "}")

    for r in kids[-1]:
        emit(r, 0)
    out += ["MOTION", f"Frames: {values.shape[0]}", f"Frame Time: {frame_time:.9g}"]
    out += [" ".join(fmt % v for v in row) for row in values]
    return nl.join(out) + nl


def reference_positions(joints: list[Joint], values: np.ndarray) -> np.ndarray:
    """World joint positions ``(F, J, 3)`` by 4x4 matrices, channel by channel (the BVH definition)."""
    n_frames = values.shape[0]
    world = np.zeros((n_frames, len(joints), 4, 4))
    col = 0
    for i, j in enumerate(joints):
        t = np.broadcast_to(np.asarray(j.offset, dtype=float), (n_frames, 3)).copy()
        m = np.broadcast_to(np.eye(3), (n_frames, 3, 3)).copy()
        for ch in j.channels:
            axis, kind = ch[0].upper(), ch[1:].lower()
            if kind == "position":
                t[:, "XYZ".index(axis)] = values[:, col]
            else:
                m = m @ elementary(axis, values[:, col])
            col += 1
        local = np.zeros((n_frames, 4, 4))
        local[:, :3, :3] = m
        local[:, :3, 3] = t
        local[:, 3, 3] = 1.0
        world[:, i] = local if j.parent < 0 else world[:, j.parent] @ local
    return world[..., :3, 3]


def synthetic(rng: np.random.Generator, root_order: str, joint_order: str, n_frames: int = 7,
              root_pos_last: bool = False) -> tuple[list[Joint], np.ndarray]:
    """A 7-joint tree using ``root_order``/``joint_order`` rotation channels, a non-root joint with
    position channels, a joint with two rotation channels, and two End Sites."""
    rot_root = [f"{a}rotation" for a in root_order]
    pos = ["Xposition", "Yposition", "Zposition"]
    rot = [f"{a}rotation" for a in joint_order]
    joints = [
        Joint("Hips", -1, (0.5, 90.0, -1.0), rot_root + pos if root_pos_last else pos + rot_root),
        Joint("Spine", 0, (0.0, 10.0, 0.5), rot),
        Joint("Head", 1, (0.0, 20.0, 1.0), ["Zposition", "Xposition"] + rot[::-1]),  # partial positions
        Joint("Head_End", 2, (0.0, 8.0, 0.0), [], end_site=True),
        Joint("Leg", 0, (10.0, -5.0, 0.0), [rot[0], rot[2]]),  # two rotation channels
        Joint("Foot", 4, (0.0, -40.0, 3.0), rot),
        Joint("Foot_End", 5, (0.0, -5.0, 10.0), [], end_site=True),
    ]
    n_ch = sum(len(j.channels) for j in joints)
    values = rng.uniform(-179.0, 179.0, size=(n_frames, n_ch)).round(4)
    col = 0
    for j in joints:  # positions: plausible lengths
        for ch in j.channels:
            if ch.endswith("position"):
                values[:, col] = rng.uniform(-50.0, 50.0, size=n_frames).round(4)
            col += 1
    return joints, values


def assert_same_motion(sk_a: Skeleton, clip_a: Clip, sk_b: Skeleton, clip_b: Clip, atol: float) -> None:
    assert sk_a.names == sk_b.names
    np.testing.assert_array_equal(sk_a.parents, sk_b.parents)
    np.testing.assert_allclose(sk_a.translations, sk_b.translations, rtol=0, atol=atol)
    assert clip_a.n_frames == clip_b.n_frames
    np.testing.assert_allclose(clip_a.pose.translations, clip_b.pose.translations, rtol=0, atol=atol)
    assert np.all(R.equal(clip_a.pose.rotations, clip_b.pose.rotations, atol=atol))
    fk_a = forward_kinematics(sk_a, clip_a.pose).positions
    fk_b = forward_kinematics(sk_b, clip_b.pose).positions
    scale = max(1.0, float(np.abs(fk_a).max()))
    np.testing.assert_allclose(fk_a, fk_b, rtol=0, atol=atol * scale * 10)


# ------------------------------------------------------------ synthetic files
@pytest.mark.parametrize("order", PERMUTATIONS)
@pytest.mark.parametrize("root_pos_last", [False, True])
def test_every_channel_order_matches_matrix_reference(tmp_path: Path, rng: np.random.Generator,
                                                      order: str, root_pos_last: bool) -> None:
    root_order = PERMUTATIONS[(PERMUTATIONS.index(order) + 2) % 6]  # root and joints use different orders
    joints, values = synthetic(rng, root_order, order, root_pos_last=root_pos_last)
    path = tmp_path / f"{order}.bvh"
    path.write_text(bvh_text(joints, values))
    sk, clip = load_bvh(path)
    assert sk.names == tuple(j.name for j in joints)
    np.testing.assert_array_equal(sk.parents, [j.parent for j in joints])
    assert sk.meta["bvh_channels"] == tuple(tuple(j.channels) for j in joints)
    assert sk.meta["bvh_end_site"] == tuple(j.end_site for j in joints)
    np.testing.assert_array_equal(sk.translations, [j.offset for j in joints])
    np.testing.assert_array_equal(sk.rotations, np.tile([0.0, 0.0, 0.0, 1.0], (len(joints), 1)))
    assert clip.n_frames == values.shape[0]
    assert clip.fps == pytest.approx(30.0, rel=1e-8)
    ref = reference_positions(joints, values)
    got = forward_kinematics(sk, clip.pose).positions
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-9)
    # the rotation of each joint is the intrinsic Euler sequence of its channels
    col = len(joints[0].channels) + len(joints[1].channels)
    spine = values[:, len(joints[0].channels):col]
    np.testing.assert_allclose(clip.pose.rotations[:, 1], R.from_euler(order, spine, degrees=True), atol=1e-12)


@pytest.mark.parametrize("order", PERMUTATIONS)
def test_every_channel_order_round_trips_with_layout(tmp_path: Path, rng: np.random.Generator, order: str) -> None:
    joints, values = synthetic(rng, order, order[::-1])
    src = tmp_path / "in.bvh"
    src.write_text(bvh_text(joints, values))
    sk, clip = load_bvh(src)
    out = tmp_path / "out.bvh"
    save_bvh(out, sk, clip)
    sk2, clip2 = load_bvh(out)
    assert layout(sk2) == layout(sk)  # channel orders and End Sites preserved
    assert_same_motion(sk, clip, sk2, clip2, ROUND_TRIP_ATOL)
    # a second save writes the same file
    out2 = tmp_path / "out2.bvh"
    save_bvh(out2, sk2, clip2)
    assert out2.read_bytes() == out.read_bytes()


def test_line_endings_tabs_and_blanks_do_not_change_the_result(tmp_path: Path, rng: np.random.Generator) -> None:
    joints, values = synthetic(rng, "ZXY", "ZXY")
    base = bvh_text(joints, values)
    variants = {
        "crlf": bvh_text(joints, values, nl="\r\n"),
        "cr": bvh_text(joints, values, nl="\r"),
        "spaces": bvh_text(joints, values, indent="  "),
        "bom": "\ufeff" + base,
        "trailing_blanks": base.replace("\n", " \t\n") + "\n\n  \n",
        "blank_lines": base.replace("MOTION\n", "\nMOTION\n\n"),
        "tabs_between_values": base[: base.index("Frame Time")] + "\t".join(
            base[base.index("Frame Time"):].split(" ")),
        "no_final_newline": base.rstrip("\n"),
        "brace_on_joint_line": base.replace("ROOT Hips\n{", "ROOT Hips {"),
        "frames_no_space": base.replace("Frames: ", "Frames:"),
    }
    ref_path = tmp_path / "base.bvh"
    ref_path.write_text(base, newline="")
    sk0, c0 = load_bvh(ref_path)
    for name, text in variants.items():
        p = tmp_path / f"{name}.bvh"
        p.write_bytes(text.encode("utf-8"))
        sk, c = load_bvh(p)
        assert sk.names == sk0.names, name
        np.testing.assert_array_equal(c.pose.translations, c0.pose.translations, err_msg=name)
        np.testing.assert_array_equal(c.pose.rotations, c0.pose.rotations, err_msg=name)


def test_names_with_spaces_and_unicode(tmp_path: Path, rng: np.random.Generator) -> None:
    joints, values = synthetic(rng, "ZXY", "XYZ")
    joints[1].name = "Spine 01"
    joints[5].name = "Fuß_links"
    p = tmp_path / "names.bvh"
    p.write_text(bvh_text(joints, values), encoding="utf-8")
    sk, clip = load_bvh(p)
    assert sk.names[1] == "Spine 01" and sk.names[5] == "Fuß_links"
    save_bvh(tmp_path / "o.bvh", sk, clip)
    sk2, clip2 = load_bvh(tmp_path / "o.bvh")
    assert_same_motion(sk, clip, sk2, clip2, ROUND_TRIP_ATOL)


def test_numbers_parse_exactly_like_python_float(tmp_path: Path, rng: np.random.Generator) -> None:
    """The scanner's fast decimal path and its float() fallback equal float(token) bit for bit."""
    tokens = ["0", "-0", "+1", ".5", "5.", "-.25", "1e3", "1E-3", "-2.5e+2", "123456789012345678901234567890",
              "0.1", "0.30000000000000004", "9007199254740993", "1.7976931348623157e308", "4.9e-324",
              "2.2250738585072014e-308", "000123.4500", "1e22", "1e23", "-1e-22", "1e-23", "0e999",
              "3.14159265358979323846264338327950288"]
    tokens += [repr(float(x)) for x in rng.normal(size=200) * 10.0 ** rng.integers(-30, 30, size=200)]
    tokens += [f"{x:.6f}" for x in rng.uniform(-400, 400, size=200)]
    tokens += [f"{x:.3e}" for x in rng.uniform(-1, 1, size=100)]
    n = len(tokens)
    text = "HIERARCHY\nROOT a\n{\nOFFSET 0 0 0\nCHANNELS 1 Xposition\n}\nMOTION\n"
    text += f"Frames: {n}\nFrame Time: 0.01\n" + "\n".join(tokens) + "\n"
    p = tmp_path / "numbers.bvh"
    p.write_text(text)
    _, clip = load_bvh(p)
    got = clip.pose.translations[:, 0, 0]
    want = np.array([float(t) for t in tokens])
    assert np.array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


# ----------------------------------------------------------------- real file
def test_real_file_structure_and_first_frame(shared_data: Path) -> None:
    sk, clip = load_bvh(real_file(shared_data))
    joints = [n for n, e in zip(sk.names, sk.meta["bvh_end_site"], strict=True) if not e]
    assert len(joints) == 19 and sk.n_joints == 24  # 19 joints + 5 End Sites
    assert joints[:3] == ["Hips", "Chest", "Chest2"]
    assert [n for n, e in zip(sk.names, sk.meta["bvh_end_site"], strict=True) if e] == [
        "LeftWrist_End", "RightWrist_End", "Head_End", "LeftAnkle_End", "RightAnkle_End"]
    assert clip.n_frames == 455
    assert clip.fps == pytest.approx(1 / 0.033333, rel=1e-12)
    assert sk.meta["bvh_channels"][0] == ("Xposition", "Yposition", "Zposition", "Zrotation", "Xrotation", "Yrotation")
    np.testing.assert_array_equal(sk.translations[sk.index("Chest")], [-0.1728, 10.2870, 0.1254])
    # frame 0 of the file: -44.0003 93.5663 229.0256 -7.98 -20.33 -7.46 (root), 5.71 17.50 -3.05 (Chest)
    np.testing.assert_array_equal(clip.pose.translations[0, 0], [-44.0003, 93.5663, 229.0256])
    assert R.equal(clip.pose.rotations[0, 0], R.from_euler("ZXY", [-7.98, -20.33, -7.46], degrees=True), atol=1e-15)
    assert R.equal(clip.pose.rotations[0, 1], R.from_euler("ZXY", [5.71, 17.50, -3.05], degrees=True), atol=1e-15)
    assert np.all(np.isfinite(clip.pose.rotations))


def test_real_file_fk_matches_bvhio_every_frame(shared_data: Path) -> None:
    bvhio = pytest.importorskip("bvhio")
    path = real_file(shared_data)
    sk, clip = load_bvh(path)
    fk = forward_kinematics(sk, clip.pose).positions
    root = bvhio.readAsHierarchy(str(path))
    layout = [j for j, _, _ in root.layout()]
    idx = [sk.index(j.Name) for j in layout]
    assert len(layout) == 19
    worst = 0.0
    for f in range(clip.n_frames):
        root.loadPose(f)
        ref = np.array([tuple(j.PositionWorld) for j in layout])
        worst = max(worst, float(np.abs(fk[f, idx] - ref).max()))
    assert worst <= BVHIO_ATOL, worst


def test_real_file_round_trip(shared_data: Path, tmp_path: Path) -> None:
    sk, clip = load_bvh(real_file(shared_data))
    out = tmp_path / "rt.bvh"
    save_bvh(out, sk, clip)
    sk2, clip2 = load_bvh(out)
    assert layout(sk2) == layout(sk)
    assert_same_motion(sk, clip, sk2, clip2, ROUND_TRIP_ATOL)
    assert clip2.fps == pytest.approx(clip.fps, rel=1e-8)
    # channel values are the file's up to the Euler branch: re-derived angles give the same rotations
    text = out.read_text()
    assert "CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation" in text
    assert text.count("End Site") == 5


# --------------------------------------------------------------- units, axes
def test_scale_multiplies_lengths_only(shared_data: Path, tmp_path: Path) -> None:
    sk, clip = load_bvh(real_file(shared_data))
    skm, clipm = load_bvh(real_file(shared_data), scale=0.01)
    np.testing.assert_allclose(skm.translations, sk.translations * 0.01, rtol=1e-15, atol=0)
    np.testing.assert_allclose(clipm.pose.translations, clip.pose.translations * 0.01, rtol=1e-15, atol=0)
    np.testing.assert_array_equal(clipm.pose.rotations, clip.pose.rotations)
    out = tmp_path / "cm.bvh"
    save_bvh(out, skm, clipm, scale=0.01)  # writes centimetres again
    sk2, clip2 = load_bvh(out)
    assert_same_motion(sk, clip, sk2, clip2, ROUND_TRIP_ATOL)
    with pytest.raises(ValueError, match="scale"):
        load_bvh(real_file(shared_data), scale=0.0)


def test_z_up_file_is_converted_to_y_up(shared_data: Path, tmp_path: Path) -> None:
    sk, clip = load_bvh(real_file(shared_data))
    skz, clipz = load_bvh(real_file(shared_data), up="z")
    p = forward_kinematics(sk, clip.pose).positions
    pz = forward_kinematics(skz, clipz.pose).positions
    # file (x, y, z) with z up is kinema (x, z, -y)
    np.testing.assert_allclose(pz, np.stack([p[..., 0], p[..., 2], -p[..., 1]], axis=-1), rtol=0, atol=1e-9)
    np.testing.assert_allclose(skz.rotations[:, 3], 1.0)  # rest rotations stay identity
    # saving with up="z" writes the original file's numbers back
    out = tmp_path / "z.bvh"
    save_bvh(out, skz, clipz, up="z")
    sk2, clip2 = load_bvh(out)
    assert_same_motion(sk, clip, sk2, clip2, ROUND_TRIP_ATOL)
    with pytest.raises(ValueError, match="up"):
        load_bvh(real_file(shared_data), up="x")


# --------------------------------------------------------------- save rules
def test_save_generic_skeleton_gets_default_channels(tmp_path: Path, rng: np.random.Generator) -> None:
    sk = Skeleton(["root", "a", "b", "c"], [-1, 0, 1, 0], rng.normal(size=(4, 3)))
    n_frames = 5
    rot = R.normalize(rng.normal(size=(n_frames, 4, 4)))
    t = np.broadcast_to(sk.translations, (n_frames, 4, 3)).copy()
    t[:, 0] = rng.normal(size=(n_frames, 3))
    clip = Clip(Pose(t, rot), fps=24.0)
    out = tmp_path / "g.bvh"
    save_bvh(out, sk, clip, rotation_order="YXZ")
    sk2, clip2 = load_bvh(out)
    assert sk2.meta["bvh_channels"] == (
        ("Xposition", "Yposition", "Zposition", "Yrotation", "Xrotation", "Zrotation"),
        ("Yrotation", "Xrotation", "Zrotation"), ("Yrotation", "Xrotation", "Zrotation"),
        ("Yrotation", "Xrotation", "Zrotation"))
    assert sk2.meta["bvh_end_site"] == (False,) * 4
    assert_same_motion(sk, clip, sk2, clip2, ROUND_TRIP_ATOL)
    assert clip2.fps == pytest.approx(24.0, rel=1e-9)


def test_save_adds_channels_the_motion_needs(tmp_path: Path, rng: np.random.Generator) -> None:
    """A joint read with only Zrotation that the clip turns about X, and a translated joint
    without position channels: the writer widens their channels instead of dropping motion."""
    joints = [Joint("r", -1, (0.0, 0.0, 0.0), ["Xposition", "Yposition", "Zposition", "Zrotation"]),
              Joint("a", 0, (0.0, 1.0, 0.0), ["Zrotation"]),
              Joint("b", 1, (0.0, 1.0, 0.0), ["Yrotation", "Xrotation"]),
              Joint("b_End", 2, (0.0, 1.0, 0.0), [], end_site=True)]
    values = rng.uniform(-90, 90, size=(4, 7))
    src = tmp_path / "few.bvh"
    src.write_text(bvh_text(joints, values))
    sk, clip = load_bvh(src)
    # unchanged motion: layout kept exactly
    save_bvh(tmp_path / "same.bvh", sk, clip)
    assert layout(load_bvh(tmp_path / "same.bvh")[0]) == layout(sk)
    # edit: turn "a" about X, move "b", move the End Site
    r = clip.pose.rotations.copy()
    t = clip.pose.translations.copy()
    r[:, 1] = R.multiply(r[:, 1], R.from_euler("XYZ", [[20.0, 0.0, 0.0]] * 4, degrees=True))
    t[:, 2, 0] += 0.5
    t[:, 3, 2] += 0.25
    edited = Clip(Pose(t, r), fps=clip.fps)
    save_bvh(tmp_path / "wide.bvh", sk, edited)
    sk2, clip2 = load_bvh(tmp_path / "wide.bvh")
    ch = sk2.meta["bvh_channels"]
    assert ch[1] == ("Zrotation", "Xrotation")  # Rz(a) Rx(20): X is needed, Y is not
    assert ch[2] == ("Xposition", "Yrotation", "Xrotation")  # only the axis that moved
    assert sk2.meta["bvh_end_site"][3] is False and ch[3] == ("Zposition",)  # a moving End Site becomes a joint
    np.testing.assert_allclose(forward_kinematics(sk2, clip2.pose).positions,
                               forward_kinematics(sk, edited.pose).positions, rtol=0, atol=1e-5)


def test_save_refuses_what_bvh_cannot_hold(tmp_path: Path, rng: np.random.Generator) -> None:
    sk = Skeleton(["r", "a"], [-1, 0], [[0, 0, 0], [0, 1, 0]], scales=[[1, 1, 1], [2, 2, 2]])
    clip = Clip(Pose(np.zeros((2, 2, 3)), R.identity((2, 2))), fps=30)
    with pytest.raises(SkeletonError, match="scale"):
        save_bvh(tmp_path / "x.bvh", sk, clip)
    sk1 = Skeleton(["r", "a"], [-1, 0], [[0, 0, 0], [0, 1, 0]])
    with pytest.raises(ShapeError):
        save_bvh(tmp_path / "x.bvh", sk1, Clip(Pose(np.zeros((2, 3, 3)), R.identity((2, 3))), fps=30))
    with pytest.raises(ShapeError):
        save_bvh(tmp_path / "x.bvh", sk1, Clip(Pose(np.zeros((2, 2, 2, 3)), R.identity((2, 2, 2))), fps=30))
    nan = np.zeros((2, 2, 3))
    nan[1, 1, 0] = np.nan
    with pytest.raises(SkeletonError, match="NaN"):
        save_bvh(tmp_path / "x.bvh", sk1, Clip(Pose(nan, R.identity((2, 2))), fps=30))
    uneven = Clip(Pose(np.zeros((3, 2, 3)), R.identity((3, 2))), fps=30, times=np.array([0.0, 0.1, 0.3]))
    with pytest.raises(ValueError, match="evenly"):
        save_bvh(tmp_path / "x.bvh", sk1, uneven)
    assert not (tmp_path / "x.bvh").exists()


def test_save_is_atomic_and_keeps_an_existing_file_on_failure(tmp_path: Path, monkeypatch: Any,
                                                              shared_data: Path) -> None:
    sk, clip = load_bvh(real_file(shared_data))
    out = tmp_path / "keep.bvh"
    out.write_text("old contents")
    import kinema.io._bvh as bvh_mod

    def boom(values: np.ndarray, precision: int) -> bytes:
        raise KeyboardInterrupt

    monkeypatch.setattr(bvh_mod, "_motion_bytes", boom)
    with pytest.raises(KeyboardInterrupt):
        save_bvh(out, sk, clip)
    assert out.read_text() == "old contents"
    assert os.listdir(tmp_path) == ["keep.bvh"]
    monkeypatch.undo()
    with pytest.raises(FileExistsError):
        save_bvh(out, sk, clip, overwrite=False)
    save_bvh(out, sk, clip)
    assert out.read_text().startswith("HIERARCHY")


# ----------------------------------------------------------------- bad files
BAD_CASES = [
    # (name, mutation of GOOD_BVH, line, message fragment)
    ("truncated motion", lambda s: s[: s.rindex("1 2 3 4 5")], 20, "truncated MOTION"),
    ("truncated mid-line", lambda s: s[:-8], 21, "truncated MOTION"),
    ("truncated hierarchy", lambda s: s[: s.index("  JOINT")], 5, "unexpected end of file"),
    ("fewer frames declared", lambda s: s.replace("Frames: 3", "Frames: 2"), 21, "more frame data"),
    ("huge frame count", lambda s: s.replace("Frames: 3", "Frames: 99999999999999"), 21, "truncated MOTION"),
    ("channel count", lambda s: s.replace("CHANNELS 3", "CHANNELS 4"), 9, "says 4 channels but lists 3"),
    ("short frame line", lambda s: s.replace("1 2 3 4 5 6 7 8 9\n1", "1 2 3 4 5 6 7 8\n1", 1), 19, "has 8 values"),
    ("long frame line", lambda s: s.replace("7 8 9\n", "7 8 9 10\n", 1), 19, "more than 9"),
    ("non-numeric value", lambda s: s.replace("5 6 7", "5 x 7", 1), 19, "non-numeric value 'x'"),
    ("nan value", lambda s: s.replace("5 6 7", "5 nan 7", 1), 19, "non-numeric value 'nan'"),
    ("comma decimal", lambda s: s.replace("5 6 7", "5 6,5 7", 1), 19, "non-numeric value '6,5'"),
    ("overflow", lambda s: s.replace("5 6 7", "5 1e999 7", 1), 19, "out of range"),
    ("unknown keyword", lambda s: s.replace("  JOINT Leg", "  BONE Leg"), 6, "unknown keyword 'BONE'"),
    ("unknown channel", lambda s: s.replace("3 Zrotation Xrotation Yrotation\n    End", "3 Zrot Xrotation Yrotation\n"
                                            "    End"), 9, "unknown channel 'Zrot'"),
    ("duplicate channel", lambda s: s.replace("Xrotation Yrotation\n    End", "Xrotation Zrotation\n    End"),
     9, "listed twice"),
    ("offset not numeric", lambda s: s.replace("OFFSET 1 -2 0", "OFFSET 1 -2 zero"), 8, "'zero' is not a number"),
    ("offset two numbers", lambda s: s.replace("OFFSET 1 -2 0", "OFFSET 1 -2"), 8, "OFFSET needs 3 numbers"),
    ("missing brace", lambda s: s.replace("  }\n}\n", "}\n"), 15, "missing '}'"),
    ("extra brace", lambda s: s.replace("}\nMOTION", "}\n}\nMOTION"), 16, "'}' without an open joint"),
    ("no HIERARCHY", lambda s: s.replace("HIERARCHY\n", ""), 1, "starts with HIERARCHY"),
    ("frame time zero", lambda s: s.replace("0.04", "0"), 18, "Frame Time must be positive"),
    ("frames not int", lambda s: s.replace("Frames: 3", "Frames: 3.5"), 17, "Frames: <count>"),
    ("missing frame time", lambda s: s.replace("Frame Time: 0.04\n", ""), 18, "Frame Time"),
    ("duplicate joint", lambda s: s.replace("JOINT Leg", "JOINT Hips"), 6, "used twice"),
    ("end site with channels", lambda s: s.replace("      OFFSET 0 -3 0\n",
                                                   "      OFFSET 0 -3 0\n      CHANNELS 1 Xrotation\n"),
     13, "End Site has no CHANNELS"),
    ("missing offset", lambda s: s.replace("    OFFSET 1 -2 0\n", ""), 13, "has no OFFSET"),
    ("non-utf8 name", lambda s: s.replace("JOINT Leg", "JOINT L\udcffg"), 6, "not UTF-8"),
    ("non-utf8 motion", lambda s: s.replace("5 6 7", "5 \udce96 7", 1), 19, "not UTF-8"),
]


@pytest.mark.parametrize("name,mutate,line,fragment", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_files_raise_file_format_error_with_line(tmp_path: Path, name: str, mutate: Any, line: int,
                                                     fragment: str) -> None:
    good = tmp_path / "good.bvh"
    good.write_text(GOOD_BVH)
    load_bvh(good)  # the unmutated file is fine
    p = tmp_path / "bad.bvh"
    p.write_bytes(mutate(GOOD_BVH).encode("utf-8", "surrogateescape"))
    with pytest.raises(FileFormatError) as info:
        load_bvh(p)
    err = info.value
    assert err.path == os.fspath(p)
    assert err.line == line, str(err)
    assert fragment in str(err)
    assert str(err).startswith(f"{p}:{line}: ")


def test_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_bvh(tmp_path / "nope.bvh")


@settings(max_examples=150)
@given(data=st.data())
def test_fuzz_mutated_real_file_only_raises_file_format_error(shared_data: Path, tmp_path_factory: Any,
                                                              data: st.DataObject) -> None:
    """Mutations of the real file (a few frames of it) either load to finite arrays or raise
    FileFormatError with the file and a line inside it: never another exception."""
    src = bytearray(small_capture(shared_data))
    n_ops = data.draw(st.integers(1, 4))
    for _ in range(n_ops):
        op = data.draw(st.sampled_from(["delete", "insert", "replace", "truncate", "dup_line", "swap_token"]))
        i = data.draw(st.integers(0, len(src)))
        if op == "delete":
            del src[i:i + data.draw(st.integers(1, 40))]
        elif op == "insert":
            src[i:i] = data.draw(st.binary(min_size=1, max_size=8)
                                 | st.sampled_from([b"{", b"}", b" JOINT X\n", b"End Site", b"\r", b"\n", b"-",
                                                    b"e", b".", b"nan", b"\t", b"\xc3", b"\xff", b"CHANNELS 3 "]))
        elif op == "replace" and i < len(src):
            src[i] = data.draw(st.integers(0, 255))
        elif op == "truncate":
            del src[i:]
        elif op == "dup_line":
            a = src.rfind(b"\n", 0, i) + 1
            b = src.find(b"\n", i)
            b = len(src) if b < 0 else b + 1
            src[a:a] = src[a:b]
        elif op == "swap_token":
            src[i:i] = data.draw(st.sampled_from([b" 1", b" 1e5", b"ROOT", b"MOTION\n", b"Frames: 99\n", b"OFFSET"]))
    path = tmp_path_factory.mktemp("fuzz") / "m.bvh"
    path.write_bytes(bytes(src))
    try:
        sk, clip = load_bvh(path)
    except FileFormatError as err:
        assert err.path == os.fspath(path)
        n_lines = bytes(src).count(b"\n") + bytes(src).count(b"\r") + 1
        assert isinstance(err.line, int) and 1 <= err.line <= n_lines, (err.line, str(err))
        return
    assert clip.pose.translations.shape == (clip.n_frames, sk.n_joints, 3)
    assert np.all(np.isfinite(clip.pose.translations)) and np.all(np.isfinite(clip.pose.rotations))
    np.testing.assert_allclose(np.linalg.norm(clip.pose.rotations, axis=-1), 1.0, atol=1e-12)


# ------------------------------------------------------------------- no JIT
_CHILD = """
import json, sys, numpy as np
from kinema.io import load_bvh, save_bvh
sk, clip = load_bvh(sys.argv[1])
save_bvh(sys.argv[2], sk, clip)
np.savez(sys.argv[3], t=clip.pose.translations, r=clip.pose.rotations)
"""


def test_no_jit_path_gives_identical_results(shared_data: Path, tmp_path: Path) -> None:
    """NUMBA_DISABLE_JIT=1 runs the same scanner and writer kernels as Python: same bytes, same arrays.

    Translations are parsed numbers (bit for bit).  Rotations come from the
    Euler-to-quaternion kernel, where the compiled code may fuse a
    multiply-add (``fastmath={"contract"}``, see ``kinema._kernels._jit``)
    and Python cannot: they agree to 2 ulp of a unit quaternion.
    """
    src = tmp_path / "small.bvh"
    src.write_bytes(small_capture(shared_data, frames=40))
    outs = {}
    for flag in ("0", "1"):
        env = dict(os.environ, NUMBA_DISABLE_JIT=flag)
        bvh_out = tmp_path / f"out{flag}.bvh"
        npz = tmp_path / f"arr{flag}.npz"
        subprocess.run([sys.executable, "-c", _CHILD, str(src), str(bvh_out), str(npz)], env=env, check=True,
                       cwd=ROOT_DIR, timeout=600)
        outs[flag] = (bvh_out.read_bytes(), np.load(npz))
    assert outs["0"][0] == outs["1"][0]
    np.testing.assert_array_equal(outs["0"][1]["t"], outs["1"][1]["t"])
    np.testing.assert_allclose(outs["0"][1]["r"], outs["1"][1]["r"], rtol=0.0, atol=4.5e-16)
    sk, clip = load_bvh(src)
    np.testing.assert_array_equal(outs["0"][1]["t"], clip.pose.translations)


def test_writer_matches_printf_formatting(rng: np.random.Generator) -> None:
    """The fixed-point writer kernel prints what '%.*f' prints (without '-' on a zero)."""
    from kinema.io._bvh import _motion_bytes

    v = rng.normal(size=(300, 7)) * 10.0 ** rng.integers(-8, 6, size=(300, 7))
    v[0, :4] = [-0.0, -1e-9, 1 / 128, 0.5]
    for p in (0, 3, 6, 9):
        got = _motion_bytes(v, p).decode().split("\n")[:-1]
        want = [" ".join(f"%.{p}f" % x for x in row) for row in v]
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            w_clean = " ".join(x[1:] if x.lstrip("-0.") == "" and x.startswith("-") else x for x in w.split(" "))
            assert g == w_clean
    big = np.array([[1e300, -2.5]])  # beyond exact integers: Python's formatting takes over
    assert _motion_bytes(big, 2).decode() == f"{1e300:.2f} {-2.5:.2f}\n"
    # a product beyond float64 (1e308 * 10**6) takes the same path, without numpy's overflow warning
    huge = np.array([[1e308, -2.5]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _motion_bytes(huge, 6).decode() == f"{1e308:.6f} {-2.5:.6f}\n"


def test_kinema_io_import_is_light() -> None:
    """``import kinema.io`` loads neither pygltflib (only ``save_gltf`` needs it) nor numba."""
    code = "import sys, kinema.io; print(json.dumps(['pygltflib' in sys.modules, 'numba' in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", "import json;" + code], capture_output=True, text=True, check=True,
                         cwd=ROOT_DIR)
    assert json.loads(out.stdout) == [False, False]
    assert callable(kinema.io.load_bvh)
