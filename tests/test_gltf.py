"""glTF 2.0 / GLB in and out (kinema.io.load_gltf / save_gltf), on the Khronos sample files and synthetic files.

The real files are tests/data/gltf/*.gltf (CC BY 4.0, Cesium, from KhronosGroup/glTF-Sample-Models;
provenance in that folder's SOURCES.md).  Independent references used here: the file's JSON read with
``json`` and its accessors decoded with plain ``np.frombuffer`` (no kinema code), node matrices composed
with scipy's Rotation, and the Khronos glTF-Validator (npm ``gltf-validator``) when node and npm exist.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

import kinema
from _io_mutate import json_leaves
from kinema import Clip, FileFormatError, Pose, Skeleton, forward_kinematics
from kinema.io import bone_mesh, load_gltf, save_gltf

pytest.importorskip("pygltflib")

FILES = ["RiggedSimple.gltf", "RiggedFigure.gltf", "RiggedSimple-2e6fed56.gltf"]

# Float32 data in the files: values agree with float64 references to ~1e-7 relative.
F32_TOL = 1e-6


# ----------------------------------------------------------------- helpers
def _gltf_path(shared_data: Path, name: str) -> Path:
    return shared_data / "gltf" / name


def _raw_accessor(doc: dict[str, Any], i: int) -> np.ndarray:
    """Decode accessor ``i`` of an embedded-buffer document with plain numpy (independent of kinema)."""
    acc = doc["accessors"][i]
    bv = doc["bufferViews"][acc["bufferView"]]
    uri = doc["buffers"][bv["buffer"]]["uri"]
    data = base64.b64decode(uri.split(",", 1)[1])
    dt = {5126: "<f4", 5123: "<u2", 5125: "<u4", 5121: "<u1"}[acc["componentType"]]
    n = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT4": 16}[acc["type"]]
    assert bv.get("byteStride") in (None, n * np.dtype(dt).itemsize)  # tightly packed in these files
    off = bv.get("byteOffset", 0) + acc.get("byteOffset", 0)
    return np.frombuffer(data, dtype=dt, count=acc["count"] * n, offset=off).reshape(acc["count"], n).astype(float)


def _node_matrix(node: dict[str, Any], trs: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """Local 4x4 of a glTF node from its JSON (scipy for the quaternion), TRS overridden by ``trs``."""
    if "matrix" in node:
        return np.array(node["matrix"], dtype=float).reshape(4, 4).T
    trs = trs or {}
    t = trs.get("translation", np.array(node.get("translation", [0, 0, 0]), dtype=float))
    q = trs.get("rotation", np.array(node.get("rotation", [0, 0, 0, 1]), dtype=float))
    s = trs.get("scale", np.array(node.get("scale", [1, 1, 1]), dtype=float))
    m = np.eye(4)
    m[:3, :3] = Rotation.from_quat(q / np.linalg.norm(q)).as_matrix() * s
    m[:3, 3] = t
    return m


def _node_worlds(doc: dict[str, Any],
                 overrides: dict[int, dict[str, np.ndarray]] | None = None) -> dict[int, np.ndarray]:
    """Global matrix of every node, composed down the JSON hierarchy."""
    overrides = overrides or {}
    parent = {c: i for i, n in enumerate(doc["nodes"]) for c in n.get("children", [])}
    out: dict[int, np.ndarray] = {}

    def world(i: int) -> np.ndarray:
        if i not in out:
            local = _node_matrix(doc["nodes"][i], overrides.get(i))
            out[i] = local if i not in parent else world(parent[i]) @ local
        return out[i]

    for i in range(len(doc["nodes"])):
        world(i)
    return out


class _Builder:
    """A small glTF document with one embedded buffer, for synthetic test files."""

    def __init__(self) -> None:
        self.doc: dict[str, Any] = {"asset": {"version": "2.0"}, "scene": 0, "scenes": [{"nodes": []}], "nodes": [],
                                    "accessors": [], "bufferViews": [], "buffers": []}
        self.data = bytearray()

    def node(self, **kw: Any) -> int:
        self.doc["nodes"].append(kw)
        return len(self.doc["nodes"]) - 1

    def accessor(self, arr: Any, typ: str, ct: int = 5126, **kw: Any) -> int:
        dt = {5126: "<f4", 5123: "<u2", 5125: "<u4", 5121: "<u1", 5122: "<i2"}[ct]
        a = np.ascontiguousarray(np.asarray(arr), dtype=dt)
        raw = a.tobytes()
        self.doc["bufferViews"].append({"buffer": 0, "byteOffset": len(self.data), "byteLength": len(raw)})
        self.data += raw + b"\0" * (-len(raw) % 4)
        count = a.shape[0]
        acc = {"bufferView": len(self.doc["bufferViews"]) - 1, "componentType": ct, "count": count, "type": typ}
        acc.update(kw)
        self.doc["accessors"].append(acc)
        return len(self.doc["accessors"]) - 1

    def finish(self) -> dict[str, Any]:
        doc = copy.deepcopy(self.doc)
        uri = "data:application/octet-stream;base64," + base64.b64encode(bytes(self.data)).decode()
        doc["buffers"] = [{"byteLength": len(self.data), "uri": uri}]
        return doc

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.finish()))
        return path


def _glb_bytes(doc: dict[str, Any], binary: bytes) -> bytes:
    js = json.dumps(doc).encode()
    js += b" " * (-len(js) % 4)
    binary = binary + b"\0" * (-len(binary) % 4)
    total = 12 + 8 + len(js) + 8 + len(binary)
    return (b"glTF" + struct.pack("<II", 2, total) + struct.pack("<I", len(js)) + b"JSON" + js
            + struct.pack("<I", len(binary)) + b"BIN\0" + binary)


def _to_glb(doc: dict[str, Any]) -> bytes:
    """An embedded-buffer document as GLB bytes (buffer 0 moved into the BIN chunk)."""
    d = copy.deepcopy(doc)
    data = base64.b64decode(d["buffers"][0].pop("uri").split(",", 1)[1])
    return _glb_bytes(d, data)


def _rig(path: Path, *, interp: str = "LINEAR", times: Any = (0.0, 1.0), tr: Any = None, rot: Any = None,
         sc: Any = None) -> Path:
    """Two-joint skin (root at origin, child at +1 y) with one animated channel per given track on the child."""
    b = _Builder()
    root = b.node(name="root", children=[1])
    b.node(name="child", translation=[0.0, 1.0, 0.0])
    b.doc["scenes"][0]["nodes"] = [root]
    b.doc["skins"] = [{"joints": [0, 1]}]
    t_acc = b.accessor(np.asarray(times, dtype=float).reshape(-1, 1), "SCALAR", min=[float(times[0])],
                       max=[float(times[-1])])
    samplers, channels = [], []
    for path_name, vals in (("translation", tr), ("rotation", rot), ("scale", sc)):
        if vals is None:
            continue
        arr = np.asarray(vals, dtype=float)
        samplers.append({"input": t_acc, "output": b.accessor(arr, "VEC4" if arr.shape[1] == 4 else "VEC3"),
                         "interpolation": interp})
        channels.append({"sampler": len(samplers) - 1, "target": {"node": 1, "path": path_name}})
    b.doc["animations"] = [{"name": "a", "samplers": samplers, "channels": channels}]
    return b.write(path)


# ============================================================ real files
@pytest.mark.parametrize("name", FILES)
def test_real_files_load(shared_data: Path, name: str) -> None:
    path = _gltf_path(shared_data, name)
    doc = json.loads(path.read_text())
    asset = load_gltf(path)
    sk = asset.skeleton
    skin = doc["skins"][0]
    # Every skin joint is a skeleton joint; parents come first; parent relation matches the node tree.
    assert sorted(asset.nodes) == sorted(skin["joints"])
    assert np.all(sk.parents < np.arange(sk.n_joints))
    node_parent = {c: i for i, n in enumerate(doc["nodes"]) for c in n.get("children", [])}
    for j, n in enumerate(asset.nodes):
        p = sk.parents[j]
        if p >= 0:
            assert node_parent[n] == asset.nodes[p]
        else:
            assert node_parent.get(n) not in skin["joints"]
    # Names: the node name, or node_<index> when the node is unnamed.
    for j, n in enumerate(asset.nodes):
        assert sk.names[j] == doc["nodes"][n].get("name", f"node_{n}")
    # Mesh: every vertex and triangle, joints remapped from skin order to skeleton order.
    prim = doc["meshes"][0]["primitives"][0]
    pos = _raw_accessor(doc, prim["attributes"]["POSITION"])
    assert asset.mesh is not None
    np.testing.assert_array_equal(asset.mesh.positions, pos)
    np.testing.assert_array_equal(asset.mesh.indices.ravel(), _raw_accessor(doc, prim["indices"])[:, 0])
    raw_joints = _raw_accessor(doc, prim["attributes"]["JOINTS_0"]).astype(int)
    skin_nodes = np.array(skin["joints"])
    np.testing.assert_array_equal(np.array(asset.nodes)[asset.mesh.joints], skin_nodes[raw_joints])
    np.testing.assert_allclose(asset.mesh.weights.sum(axis=1), 1.0, atol=2e-7)
    # Inverse bind matrices follow the joints to their new order.
    ibm_raw = _raw_accessor(doc, skin["inverseBindMatrices"]).reshape(-1, 4, 4).transpose(0, 2, 1)
    for j, n in enumerate(asset.nodes):
        np.testing.assert_array_equal(asset.inverse_bind_matrices[j], ibm_raw[skin["joints"].index(n)])
    assert asset.notes == ()


def test_real_file_summaries(shared_data: Path) -> None:
    """The figures SOURCES.md gives for each file."""
    a = load_gltf(_gltf_path(shared_data, "RiggedSimple.gltf"))
    assert a.skeleton.names == ("Bone", "Bone.001")
    assert a.mesh is not None and a.mesh.positions.shape == (160, 3) and a.mesh.indices.shape == (188, 3)
    (clip,) = a.clips.values()
    assert clip.n_frames == 50 and clip.times is not None
    assert clip.times[0] == pytest.approx(0.041667, abs=1e-6) and clip.times[-1] == pytest.approx(2.083333, abs=1e-6)
    f = load_gltf(_gltf_path(shared_data, "RiggedFigure.gltf"))
    assert f.skeleton.n_joints == 19 and f.skeleton.names[0] == "torso_joint_1"
    assert f.mesh is not None and f.mesh.positions.shape == (370, 3) and f.mesh.indices.shape == (256, 3)
    (fc,) = f.clips.values()
    assert fc.n_frames == 2 and fc.duration == pytest.approx(1.25)
    old = load_gltf(_gltf_path(shared_data, "RiggedSimple-2e6fed56.gltf"))
    assert old.skeleton.names == ("node_2", "node_3")  # unnamed joints, named by node index
    assert old.mesh is not None and old.mesh.positions.shape == (96, 3)
    assert next(iter(old.clips.values())).n_frames == 3


# Which files qualify for "FK at the rest pose equals inverse(IBM)": all three.  Their rest pose IS the
# bind pose, but the IBMs were authored in the mesh's own Z-up space, which the root node `Z_UP` (node 0,
# a -90 deg rotation about x) maps to glTF's Y-up world.  So world(joint) @ IBM equals Z_UP's world matrix for
# every joint (SOURCES.md), and the exact statement is inverse(Z_UP) @ FK_world(rest) == inverse(IBM).
# For RiggedFigure Z_UP is also the skinned mesh node's world matrix (Proxy has identity TRS); for
# RiggedSimple the mesh node sits below `Armature` (an extra rotation), so it is *not* that node's world.
BIND_FRAME_NODE = {"RiggedSimple.gltf": 0, "RiggedFigure.gltf": 0, "RiggedSimple-2e6fed56.gltf": 0}


@pytest.mark.parametrize("name", FILES)
def test_rest_pose_is_bind_pose(shared_data: Path, name: str) -> None:
    path = _gltf_path(shared_data, name)
    doc = json.loads(path.read_text())
    asset = load_gltf(path)
    sk = asset.skeleton
    frame = _node_worlds(doc)[BIND_FRAME_NODE[name]]
    assert np.allclose(Rotation.from_matrix(frame[:3, :3]).as_rotvec(), [-np.pi / 2, 0, 0])  # Z_UP: z -> y
    world = forward_kinematics(sk, sk.rest_pose(), matrices=True).matrices
    assert world is not None
    expected = np.linalg.inv(asset.inverse_bind_matrices)
    np.testing.assert_allclose(np.linalg.inv(frame) @ world, expected, atol=1e-5)
    # The skinned rest mesh is the bind mesh carried into that frame.
    assert asset.mesh is not None
    skinned = asset.mesh.skinned_positions(sk, sk.rest_pose())
    np.testing.assert_allclose(skinned, asset.mesh.positions @ frame[:3, :3].T + frame[:3, 3], atol=1e-5)


@pytest.mark.parametrize("name", FILES)
def test_fk_equals_node_hierarchy_at_every_key(shared_data: Path, name: str) -> None:
    """Folding the non-joint ancestors and reordering keep glTF's world matrices, at rest and at every key."""
    path = _gltf_path(shared_data, name)
    doc = json.loads(path.read_text())
    asset = load_gltf(path)
    sk = asset.skeleton
    worlds = _node_worlds(doc)
    fk = forward_kinematics(sk, sk.rest_pose(), matrices=True).matrices
    assert fk is not None
    for j, n in enumerate(asset.nodes):
        np.testing.assert_allclose(fk[j], worlds[n], atol=1e-9)
    (clip,) = asset.clips.values()
    anim = doc["animations"][0]
    assert clip.times is not None
    tracks = {}
    for ch in anim["channels"]:
        s = anim["samplers"][ch["sampler"]]
        tracks[(ch["target"]["node"], ch["target"]["path"])] = (_raw_accessor(doc, s["input"])[:, 0],
                                                                _raw_accessor(doc, s["output"]))
    world_clip = forward_kinematics(sk, clip.pose, matrices=True).matrices
    assert world_clip is not None
    for f, t in enumerate(clip.times):
        over: dict[int, dict[str, np.ndarray]] = {}
        for (node, p), (times, vals) in tracks.items():
            k = int(np.argmin(np.abs(times - t)))
            assert abs(times[k] - t) < 1e-12  # every channel of these files shares the keys
            over.setdefault(node, {})[p] = vals[k]
        ref = _node_worlds(doc, over)
        for j, n in enumerate(asset.nodes):
            np.testing.assert_allclose(world_clip[f, j], ref[n], atol=1e-6)


# ============================================================ round trip
def _new_clip(sk: Skeleton, rng: np.random.Generator, n: int = 12) -> Clip:
    rest = sk.rest_pose((n,))
    angles = rng.uniform(-0.6, 0.6, size=(n, sk.n_joints, 3))
    rot = kinema.rotation.multiply(rest.rotations, kinema.rotation.from_rotvec(angles))
    trans = rest.translations + rng.normal(scale=0.05, size=rest.translations.shape)
    scale = rest.scales * rng.uniform(0.8, 1.25, size=rest.scales.shape)  # non-uniform: FK carries it
    return Clip(Pose(trans, rot, scale), fps=30.0)


def _assert_pose_close(a: Pose, b: Pose, atol: float) -> None:
    np.testing.assert_allclose(a.translations, b.translations, atol=atol)
    np.testing.assert_allclose(a.scales, b.scales, atol=atol)
    assert np.all(kinema.rotation.equal(a.rotations, b.rotations, atol=atol))


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("ext", [".gltf", ".glb"])
def test_resave_with_new_clip_keeps_mesh_and_skin(shared_data: Path, tmp_path: Path, rng: np.random.Generator,
                                                  name: str, ext: str) -> None:
    src = load_gltf(_gltf_path(shared_data, name))
    sk = src.skeleton
    clips = dict(src.clips)
    clips["wave"] = _new_clip(sk, rng)
    out = tmp_path / f"out{ext}"
    save_gltf(out, sk, clips)  # mesh=None: the skin the skeleton was loaded with
    back = load_gltf(out)
    if ext == ".glb":
        assert out.read_bytes()[:4] == b"glTF"
    else:
        json.loads(out.read_text())
    assert back.skeleton.names == sk.names
    np.testing.assert_array_equal(back.skeleton.parents, sk.parents)
    # Rest pose goes to the JSON as float64 decimals: exact.
    np.testing.assert_array_equal(back.skeleton.translations, sk.translations)
    np.testing.assert_allclose(back.skeleton.rotations, sk.rotations, atol=1e-15)
    np.testing.assert_array_equal(back.skeleton.scales, sk.scales)
    # Mesh and skin: float32 data that came from float32, unchanged.
    assert back.mesh is not None and src.mesh is not None
    np.testing.assert_array_equal(back.mesh.positions, src.mesh.positions)
    np.testing.assert_array_equal(back.mesh.indices, src.mesh.indices)
    np.testing.assert_array_equal(back.mesh.joints, src.mesh.joints)
    np.testing.assert_array_equal(back.mesh.weights, src.mesh.weights)
    assert src.mesh.normals is not None and back.mesh.normals is not None
    np.testing.assert_allclose(back.mesh.normals, src.mesh.normals, atol=2e-7)
    np.testing.assert_allclose(back.inverse_bind_matrices, src.inverse_bind_matrices, atol=1e-6)
    assert back.mesh.material is not None and src.mesh.material is not None
    assert back.mesh.material["pbrMetallicRoughness"]["baseColorFactor"] == \
        src.mesh.material["pbrMetallicRoughness"]["baseColorFactor"]
    # Same poses to 1e-6 (float32 animation data), old clip and new clip.
    assert set(back.clips) == set(clips)
    for k, clip in clips.items():
        got = back.clips[k]
        assert got.n_frames == clip.n_frames
        _assert_pose_close(got.pose, clip.pose.broadcast(), 1e-6)
    # The skinned mesh of the new clip is the same in both.
    pose = clips["wave"].pose
    np.testing.assert_allclose(back.mesh.skinned_positions(back.skeleton, back.clips["wave"].pose),
                               src.mesh.skinned_positions(sk, pose), atol=1e-5)


def test_resave_refuses_to_overwrite_its_source(shared_data: Path, tmp_path: Path) -> None:
    copy_path = tmp_path / "RiggedSimple.gltf"
    shutil.copy(_gltf_path(shared_data, "RiggedSimple.gltf"), copy_path)
    before = copy_path.read_bytes()
    asset = load_gltf(copy_path)
    with pytest.raises(FileExistsError):
        save_gltf(copy_path, asset.skeleton, asset.clips)
    assert copy_path.read_bytes() == before
    save_gltf(tmp_path / "other.glb", asset.skeleton, asset.clips)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["RiggedSimple.gltf", "other.glb"]  # no temp left


def test_save_options_and_bad_input(shared_data: Path, tmp_path: Path, rng: np.random.Generator) -> None:
    asset = load_gltf(_gltf_path(shared_data, "RiggedFigure.gltf"))
    sk = asset.skeleton
    clip = _new_clip(sk, rng, 5)
    save_gltf(tmp_path / "nomesh.glb", sk, clip, mesh=False)
    back = load_gltf(tmp_path / "nomesh.glb")
    assert back.mesh is None and list(back.clips) == ["clip"]
    _assert_pose_close(back.clips["clip"].pose, clip.pose, 1e-6)
    # evenly spaced at its own rate, exactly (kept in the animation's extras.kinema_clip)
    assert back.clips["clip"].times is None and back.clips["clip"].fps == clip.fps
    with pytest.raises(ValueError, match=r"\.gltf or \.glb"):
        save_gltf(tmp_path / "x.obj", sk, clip)
    with pytest.raises(kinema.ShapeError):
        save_gltf(tmp_path / "x.glb", sk, Clip(Pose(np.zeros((2, 3, 3)), np.tile([0, 0, 0, 1.0], (2, 3, 1))), 30))
    bad = clip.pose.copy()
    bad.translations[1, 2, 0] = np.nan
    with pytest.raises(FileFormatError, match="NaN"):
        save_gltf(tmp_path / "x.glb", sk, Clip(bad, 30.0))
    assert not (tmp_path / "x.glb").exists()
    # A clip equal to the rest pose still writes a valid animation (one constant channel).
    still = Clip(sk.rest_pose((3,)), 10.0)
    save_gltf(tmp_path / "still.gltf", sk, {"still": still}, mesh=False)
    back_still = load_gltf(tmp_path / "still.gltf")
    doc = json.loads((tmp_path / "still.gltf").read_text())
    assert len(doc["animations"][0]["channels"]) == 1
    _assert_pose_close(back_still.clips["still"].pose, still.pose, 1e-7)  # that channel is float32 data
    # Key times are kept when a clip carries them.
    timed = Clip(sk.rest_pose((3,)), 1.0, times=np.array([0.5, 0.7, 2.0]))
    save_gltf(tmp_path / "timed.glb", sk, {"t": timed}, mesh=False)
    got = load_gltf(tmp_path / "timed.glb").clips["t"]
    assert got.times is not None
    np.testing.assert_allclose(got.times, [0.5, 0.7, 2.0], atol=1e-7)


# ============================================================ interpolation
def test_linear_step_cubic_translation(tmp_path: Path) -> None:
    keys = np.array([[0.0, 1.0, 0.0], [2.0, 1.0, 0.0], [2.0, 3.0, 4.0]])
    lin = load_gltf(_rig(tmp_path / "l.gltf", times=(0.0, 1.0, 2.0), tr=keys), fps=4)
    c = lin.clips["a"]
    assert c.times is None and c.fps == 4 and c.n_frames == 9
    t = c.pose.translations[:, 1]
    np.testing.assert_allclose(t[2], [1.0, 1.0, 0.0], atol=1e-7)  # t=0.5: halfway
    np.testing.assert_allclose(t[6], [2.0, 2.0, 2.0], atol=1e-7)  # t=1.5
    np.testing.assert_allclose(t[[0, 4, 8]], keys, atol=1e-7)
    step = load_gltf(_rig(tmp_path / "s.gltf", interp="STEP", times=(0.0, 1.0, 2.0), tr=keys), fps=4)
    ts = step.clips["a"].pose.translations[:, 1]
    np.testing.assert_allclose(ts[[0, 1, 2, 3]], np.repeat(keys[:1], 4, axis=0), atol=1e-7)
    np.testing.assert_allclose(ts[[4, 7]], keys[[1, 1]], atol=1e-7)
    # CUBICSPLINE: rows are (in-tangent, value, out-tangent) per key; Hermite with tangents scaled by dt.
    times = (0.0, 2.0)
    a0, v0, b0 = [0, 0, 0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]
    a1, v1, b1 = [0.0, 0.0, 3.0], [4.0, 1.0, 2.0], [0, 0, 0]
    cub = load_gltf(_rig(tmp_path / "c.gltf", interp="CUBICSPLINE", times=times,
                         tr=[a0, v0, b0, a1, v1, b1]), fps=2)
    tc = cub.clips["a"].pose.translations[:, 1]
    for f, tt in enumerate(np.arange(5) / 2.0):
        u, d = tt / 2.0, 2.0
        ref = ((2 * u**3 - 3 * u**2 + 1) * np.array(v0) + (u**3 - 2 * u**2 + u) * d * np.array(b0)
               + (-2 * u**3 + 3 * u**2) * np.array(v1) + (u**3 - u**2) * d * np.array(a1))
        np.testing.assert_allclose(tc[f], ref, atol=1e-6)


def test_rotation_slerp_and_cubic_normalised(tmp_path: Path) -> None:
    q0 = [0.0, 0.0, 0.0, 1.0]
    q1 = Rotation.from_rotvec([0, 0, np.pi / 2]).as_quat()
    lin = load_gltf(_rig(tmp_path / "r.gltf", rot=[q0, q1]), fps=4)
    got = lin.clips["a"].pose.rotations[:, 1]
    for f in range(5):
        ref = Rotation.from_rotvec([0, 0, np.pi / 2 * f / 4]).as_quat()  # slerp = constant angular speed
        assert kinema.rotation.equal(got[f], ref, atol=1e-7)
    # Shortest path: a key stored as -q1 gives the same motion.
    neg = load_gltf(_rig(tmp_path / "rn.gltf", rot=[q0, -np.asarray(q1)]), fps=4)
    assert np.all(kinema.rotation.equal(neg.clips["a"].pose.rotations[:, 1], got, atol=1e-7))
    # CUBICSPLINE rotations come out unit length.
    rows = [[0, 0, 0.5, 0], q0, [0, 0, 0.5, 0], [0, 0, 0.3, 0], q1, [0, 0, 0, 0]]
    cub = load_gltf(_rig(tmp_path / "rc.gltf", interp="CUBICSPLINE", rot=rows), fps=10)
    np.testing.assert_allclose(np.linalg.norm(cub.clips["a"].pose.rotations, axis=-1), 1.0, atol=1e-12)
    assert kinema.rotation.equal(cub.clips["a"].pose.rotations[-1, 1], q1, atol=1e-7)


def test_cubic_rotation_cancelling_to_zero_falls_back(tmp_path: Path) -> None:
    """Tangents that cancel the values give a zero quaternion mid-way: the key before is used, never NaN."""
    q = [0.0, 0.0, 0.0, 1.0]
    # u = 0.5: 0.5 v0 + 0.125 d b0 + 0.5 v1 - 0.125 d a1 with d = 1, v0 = v1 = q, b0 = -4q, a1 = 4q -> 0.
    rows = [[0, 0, 0, 0], q, [0, 0, 0, -4.0], [0, 0, 0, 4.0], q, [0, 0, 0, 0]]
    a = load_gltf(_rig(tmp_path / "z.gltf", interp="CUBICSPLINE", rot=rows), fps=2)
    r = a.clips["a"].pose.rotations[:, 1]
    assert np.all(np.isfinite(r))
    assert kinema.rotation.equal(r[1], q)


def test_scale_and_clamping_outside_keys(tmp_path: Path) -> None:
    a = load_gltf(_rig(tmp_path / "k.gltf", times=(0.5, 1.0), sc=[[1, 1, 1], [2, 1, 3]]), fps=4)
    s = a.clips["a"].pose.scales[:, 1]
    assert a.clips["a"].n_frames == 5  # t = 0 .. 1.0
    np.testing.assert_allclose(s[0], [1, 1, 1])  # before the first key: first value
    np.testing.assert_allclose(s[3], [1.5, 1, 2], atol=1e-7)  # t = 0.75
    np.testing.assert_allclose(s[4], [2, 1, 3], atol=1e-7)


def test_key_times_union_and_fps_meaning(tmp_path: Path) -> None:
    b = _Builder()
    b.node(name="root", children=[1])
    b.node(name="child", translation=[0, 1, 0])
    b.doc["scenes"][0]["nodes"] = [0]
    b.doc["skins"] = [{"joints": [0, 1]}]
    ta = b.accessor([[0.0], [1.0], [3.0]], "SCALAR")
    tb = b.accessor([[0.5], [1.0]], "SCALAR")
    b.doc["animations"] = [{"samplers": [
        {"input": ta, "output": b.accessor([[0, 0, 0], [1, 0, 0], [3, 0, 0]], "VEC3")},
        {"input": tb, "output": b.accessor([[0, 0, 0, 1], [0, 0, 1, 0]], "VEC4")}],
        "channels": [{"sampler": 0, "target": {"node": 0, "path": "translation"}},
                     {"sampler": 1, "target": {"node": 1, "path": "rotation"}}]}]
    a = load_gltf(b.write(tmp_path / "u.gltf"))
    (name, clip), = a.clips.items()
    assert name == "animation_0"
    assert clip.times is not None
    np.testing.assert_allclose(clip.times, [0.0, 0.5, 1.0, 3.0], atol=1e-7)
    assert clip.fps == pytest.approx(3 / 3.0) and clip.duration == pytest.approx(3.0)
    np.testing.assert_allclose(clip.pose.translations[:, 0, 0], [0, 0.5, 1, 3], atol=1e-7)
    # The child's rotation: its first key held before 0.5, its second from 1.0 (a STEP channel is resampled
    # at a fixed rate instead: tests/test_gltf_loader_fixes.py).
    assert np.all(kinema.rotation.equal(clip.pose.rotations[:2, 1], [0, 0, 0, 1]))
    assert np.all(kinema.rotation.equal(clip.pose.rotations[2:, 1], [0, 0, 1, 0]))


# ============================================================ structure variants
def test_several_skins_and_names(tmp_path: Path) -> None:
    b = _Builder()
    b.node(name="a", children=[1])
    b.node(name="a")  # duplicate name
    b.node(children=[3], translation=[5, 0, 0])  # unnamed
    b.node(name="node_2")  # named like the generated name of node 2
    b.doc["scenes"][0]["nodes"] = [0, 2]
    b.doc["skins"] = [{"joints": [0, 1], "name": "first"}, {"joints": [3, 2], "name": "second"}]
    p = b.write(tmp_path / "m.gltf")
    a0 = load_gltf(p)
    assert a0.skeleton.names == ("a", "a_node_1")
    a1 = load_gltf(p, skin=1)
    # A real name wins over a generated one: node 3 keeps "node_2", unnamed node 2 (the root) gets a suffix.
    assert a1.skeleton.names == ("node_2_node_2", "node_2")
    assert a1.nodes == (2, 3)
    assert len(a1.notes) == 0 and a0.mesh is None
    assert load_gltf(p, skin="second").skeleton.names == a1.skeleton.names
    everything = load_gltf(p, skin=None)
    assert everything.skeleton.n_joints == 4 and everything.mesh is None
    with pytest.raises(FileFormatError, match="no skin 2"):
        load_gltf(p, skin=2)
    with pytest.raises(FileFormatError, match="no skin named"):
        load_gltf(p, skin="third")


def test_non_similarity_ancestor_becomes_a_joint(tmp_path: Path) -> None:
    """A non-uniformly scaled non-joint ancestor cannot be folded into TRS: it is kept as an extra joint."""
    b = _Builder()
    b.node(name="stretch", scale=[1.0, 2.0, 1.0], children=[1], rotation=[0, 0, 0.3826834, 0.9238795])
    b.node(name="hip", translation=[1, 0, 0], rotation=[0.3826834, 0, 0, 0.9238795], children=[2])
    b.node(name="knee", translation=[0, 1, 0])
    b.doc["scenes"][0]["nodes"] = [0]
    b.doc["skins"] = [{"joints": [1, 2]}]
    p = b.write(tmp_path / "n.gltf")
    a = load_gltf(p)
    assert a.skeleton.names == ("stretch", "hip", "knee")
    worlds = _node_worlds(json.loads(p.read_text()))
    fk = forward_kinematics(a.skeleton, a.skeleton.rest_pose(), matrices=True).matrices
    assert fk is not None
    for j, n in enumerate(a.nodes):
        np.testing.assert_allclose(fk[j], worlds[n], atol=1e-7)


def test_similarity_ancestor_is_folded_and_matrix_decomposed(tmp_path: Path) -> None:
    rot = Rotation.from_rotvec([0.3, -0.2, 0.9])
    m = np.eye(4)
    m[:3, :3] = rot.as_matrix() * 2.5
    m[:3, 3] = [1, 2, 3]
    b = _Builder()
    b.node(name="group", matrix=m.T.ravel().tolist(), children=[1])
    lm = np.eye(4)
    lm[:3, :3] = Rotation.from_rotvec([0, 1.0, 0]).as_matrix() @ np.diag([1.0, 2.0, 3.0])
    lm[:3, 3] = [0, 1, 0]
    b.node(name="j0", matrix=lm.T.ravel().tolist(), children=[2])
    b.node(name="j1", translation=[0, 0, 1])
    b.doc["scenes"][0]["nodes"] = [0]
    b.doc["skins"] = [{"joints": [1, 2]}]
    p = b.write(tmp_path / "f.gltf")
    a = load_gltf(p)
    assert a.skeleton.names == ("j0", "j1")  # group folded
    np.testing.assert_allclose(a.skeleton.scales[0], [2.5, 5.0, 7.5], atol=1e-12)
    worlds = _node_worlds(json.loads(p.read_text()))
    fk = forward_kinematics(a.skeleton, a.skeleton.rest_pose(), matrices=True).matrices
    assert fk is not None
    for j, n in enumerate(a.nodes):
        np.testing.assert_allclose(fk[j], worlds[n], atol=1e-12)
    # Shear is not TRS: an error naming the matrix.
    shear = lm.copy()
    shear[0, 1] += 0.5
    b.doc["nodes"][1]["matrix"] = shear.T.ravel().tolist()
    with pytest.raises(FileFormatError, match=r"nodes\[1\]\.matrix.*shear"):
        load_gltf(b.write(tmp_path / "s.gltf"))


def _skinned_triangle_doc(mode: int = 4, indices: Any = (0, 1, 2, 2, 1, 3), sparse: bool = False) -> _Builder:
    b = _Builder()
    b.node(name="root", children=[1])
    b.node(name="tip", translation=[0, 1, 0])
    pos = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], dtype=float)
    attrs = {"POSITION": b.accessor(pos, "VEC3", min=[0, 0, 0], max=[1, 1, 0]),
             "JOINTS_0": b.accessor(np.array([[0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]]), "VEC4",
                                    5121),
             "WEIGHTS_0": b.accessor(np.array([[255, 0, 0, 0]] * 4), "VEC4", 5121, normalized=True)}
    prim: dict[str, Any] = {"attributes": attrs, "mode": mode}
    if indices is not None:
        prim["indices"] = b.accessor(np.asarray(indices).reshape(-1, 1), "SCALAR", 5123)
    b.doc["meshes"] = [{"primitives": [prim]}]
    b.node(name="skinned", mesh=0, skin=0)
    b.doc["scenes"][0]["nodes"] = [0, 2]
    b.doc["skins"] = [{"joints": [0, 1]}]
    if sparse:
        # IBMs as a sparse accessor without bufferView: zeros patched to identity... spelled out per element.
        ident = np.tile(np.eye(4).T.ravel(), (2, 1))
        vals = b.accessor(ident, "MAT4")
        vals_view = b.doc["accessors"].pop(vals)["bufferView"]
        idx_acc = b.accessor(np.array([[0], [1]]), "SCALAR", 5123)
        idx_view = b.doc["accessors"].pop(idx_acc)["bufferView"]
        b.doc["accessors"].append({"componentType": 5126, "count": 2, "type": "MAT4", "sparse": {
            "count": 2, "indices": {"bufferView": idx_view, "componentType": 5123},
            "values": {"bufferView": vals_view}}})
        b.doc["skins"][0]["inverseBindMatrices"] = len(b.doc["accessors"]) - 1
    return b


def test_primitive_modes_normalized_weights_sparse(tmp_path: Path) -> None:
    tri = load_gltf(_skinned_triangle_doc().write(tmp_path / "t.gltf"))
    assert tri.mesh is not None
    np.testing.assert_array_equal(tri.mesh.indices, [[0, 1, 2], [2, 1, 3]])
    np.testing.assert_allclose(tri.mesh.weights[:, 0], 1.0)  # normalized u8 255 -> 1.0
    assert tri.mesh.normals is None
    strip = load_gltf(_skinned_triangle_doc(5, (0, 1, 2, 3)).write(tmp_path / "s.gltf"))
    assert strip.mesh is not None
    np.testing.assert_array_equal(strip.mesh.indices, [[0, 1, 2], [2, 1, 3]])  # odd triangle keeps winding
    fan = load_gltf(_skinned_triangle_doc(6, (0, 1, 3, 2)).write(tmp_path / "f.gltf"))
    assert fan.mesh is not None
    np.testing.assert_array_equal(fan.mesh.indices, [[0, 1, 3], [0, 3, 2]])
    noidx = load_gltf(_skinned_triangle_doc(5, None).write(tmp_path / "n.gltf"))  # non-indexed strip
    assert noidx.mesh is not None
    np.testing.assert_array_equal(noidx.mesh.indices, [[0, 1, 2], [2, 1, 3]])
    with pytest.raises(FileFormatError, match="not a multiple of 3"):
        load_gltf(_skinned_triangle_doc(4, None).write(tmp_path / "n4.gltf"))
    sp = load_gltf(_skinned_triangle_doc(sparse=True).write(tmp_path / "sp.gltf"))
    np.testing.assert_array_equal(sp.inverse_bind_matrices, np.tile(np.eye(4), (2, 1, 1)))
    lines = _skinned_triangle_doc(1, (0, 1))
    a = load_gltf(lines.write(tmp_path / "l.gltf"))
    assert a.mesh is None and any("mode 1" in n for n in a.notes)


def test_glb_and_external_buffer(shared_data: Path, tmp_path: Path) -> None:
    path = _gltf_path(shared_data, "RiggedFigure.gltf")
    doc = json.loads(path.read_text())
    ref = load_gltf(path)
    (tmp_path / "f.glb").write_bytes(_to_glb(doc))
    glb = load_gltf(tmp_path / "f.glb")
    d = copy.deepcopy(doc)
    (tmp_path / "data dir").mkdir()
    (tmp_path / "data dir" / "buf 0.bin").write_bytes(base64.b64decode(d["buffers"][0]["uri"].split(",", 1)[1]))
    d["buffers"][0]["uri"] = "data%20dir/buf%200.bin"
    (tmp_path / "ext.gltf").write_text(json.dumps(d))
    ext = load_gltf(tmp_path / "ext.gltf")
    for other in (glb, ext):
        np.testing.assert_array_equal(other.skeleton.translations, ref.skeleton.translations)
        assert other.mesh is not None and ref.mesh is not None
        np.testing.assert_array_equal(other.mesh.positions, ref.mesh.positions)
        _assert_pose_close(other.clips["animation_0"].pose, ref.clips["animation_0"].pose, 0.0)


def test_animation_on_non_skeleton_node_is_noted(shared_data: Path, tmp_path: Path) -> None:
    doc = json.loads(_gltf_path(shared_data, "RiggedSimple.gltf").read_text())
    doc["animations"][0]["channels"][0]["target"]["node"] = 1  # Armature: folded, not a joint
    p = tmp_path / "x.gltf"
    p.write_text(json.dumps(doc))
    a = load_gltf(p)
    assert any("channels[0]" in n and "not part of the skeleton" in n for n in a.notes)


# ============================================================ generated skin
def _chain_skeleton() -> Skeleton:
    return Skeleton(["hips", "spine", "head", "arm", "hand", "same_spot"], [-1, 0, 1, 1, 3, 4],
                    [[0, 90, 0], [0, 10, 0], [0, 30, 0], [20, 20, 0], [25, 0, 5], [0, 0, 0]],
                    Rotation.from_rotvec([[0, 0, 0], [0.1, 0, 0], [0, 0.2, 0], [0, 0, -0.4], [0, 0.3, 0],
                                          [0, 0, 0]]).as_quat())


def _segment_distance(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = b - a
    u = np.clip(((p - a) @ d) / (d @ d), 0.0, 1.0)
    return np.linalg.norm(p - (a + u[:, None] * d), axis=1)


def test_bone_mesh_capsules(rng: np.random.Generator) -> None:
    sk = _chain_skeleton()
    mesh = bone_mesh(sk)
    fk = forward_kinematics(sk, sk.rest_pose())
    p = fk.positions
    # One capsule per bone of positive length, weighted fully to the bone's parent joint; the zero-length
    # bone (same_spot sits on hand) gets none.
    assert set(mesh.joints[:, 0].tolist()) == {0, 1, 3}
    np.testing.assert_array_equal(mesh.weights[:, 0], 1.0)
    np.testing.assert_array_equal(mesh.weights[:, 1:], 0.0)
    pose = Pose(sk.translations, kinema.rotation.from_rotvec(rng.normal(scale=0.7, size=(4, sk.n_joints, 3))))
    posed = mesh.skinned_positions(sk, pose)
    pp = forward_kinematics(sk, pose).positions
    for parent, child in [(0, 1), (1, 2), (1, 3), (3, 4)]:
        length = np.linalg.norm(p[child] - p[parent])
        sel = np.nonzero(mesh.joints[:, 0] == parent)[0]
        # Each vertex of the parent's capsules is one radius (12% of its bone) from one of its bones.
        bones = [c for c in sk.children(parent) if np.linalg.norm(p[c] - p[parent]) > 1e-9]
        lens = {c: np.linalg.norm(p[c] - p[parent]) for c in bones}
        dist = np.min([_segment_distance(mesh.positions[sel], p[parent], p[c]) - 0.12 * lens[c] for c in bones],
                      axis=0)
        assert np.min(np.abs(dist)) < 1e-9 and length > 0
        # Rigid: posed vertices keep the same distances to the posed bone.
        for f in range(4):
            dposed = np.min([_segment_distance(posed[f, sel], pp[f, parent], pp[f, c]) - 0.12 * lens[c]
                             for c in bones], axis=0)
            np.testing.assert_allclose(np.abs(dposed).min(), 0.0, atol=1e-9)
    # Normals are unit and point outwards: every face normal agrees with its vertices' normals.
    assert mesh.normals is not None
    np.testing.assert_allclose(np.linalg.norm(mesh.normals, axis=1), 1.0, atol=1e-12)
    tri = mesh.positions[mesh.indices]
    face = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    assert np.all(np.einsum("ij,ikj->ik", face, mesh.normals[mesh.indices]) > 0.0)


def test_bone_mesh_degenerate_skeleton() -> None:
    """A single joint (no bone) gets a sphere so the file still has something to draw."""
    sk = Skeleton(["only"], [-1], [[1.0, 2.0, 3.0]])
    mesh = bone_mesh(sk)
    np.testing.assert_allclose(np.linalg.norm(mesh.positions - [1, 2, 3], axis=1), 0.05, atol=1e-12)
    np.testing.assert_array_equal(mesh.joints[:, 0], 0)


def test_bvh_like_skeleton_to_glb_with_bones(tmp_path: Path, rng: np.random.Generator) -> None:
    sk = _chain_skeleton()
    clip = _new_clip(sk, rng, 8)
    save_gltf(tmp_path / "bvh.glb", sk, {"take": clip}, mesh="bones")
    back = load_gltf(tmp_path / "bvh.glb")
    assert back.skeleton.names == sk.names and back.mesh is not None
    _assert_pose_close(back.clips["take"].pose, clip.pose, 1e-6 * 100)  # cm-sized translations in float32
    np.testing.assert_allclose(back.clips["take"].pose.translations, clip.pose.translations, rtol=1e-6, atol=1e-9)
    ref = bone_mesh(sk)
    np.testing.assert_allclose(back.mesh.positions, ref.positions, rtol=1e-6, atol=1e-5)


def test_real_bvh_to_glb(shared_data: Path, tmp_path: Path) -> None:
    """Issue 6 item 8: the mocap BVH as GLB with a capsule skin; joint positions come back to float32 precision."""
    from kinema.io import load_bvh

    sk, clip = load_bvh(shared_data / "bvh" / "test_mocapbank.bvh")
    save_gltf(tmp_path / "mocap.glb", sk, {"mocap": clip}, mesh="bones")
    back = load_gltf(tmp_path / "mocap.glb")
    assert back.skeleton.names == sk.names and back.mesh is not None
    got = back.clips["mocap"]
    assert got.n_frames == clip.n_frames
    assert got.times is None and got.fps == clip.fps  # the BVH's Frame Time, exactly
    p_ref = forward_kinematics(sk, clip.pose).positions
    p_got = forward_kinematics(back.skeleton, got.pose).positions
    scale = np.abs(p_ref).max()  # centimetres: compare relative to the motion's size (float32 data)
    np.testing.assert_allclose(p_got, p_ref, atol=1e-6 * scale)
    # Every capsule vertex moves with its joint: the skinned mesh at frame f is the rest mesh rigidly carried.
    world = forward_kinematics(back.skeleton, got.pose[100], matrices=True).matrices
    assert world is not None
    j = back.mesh.joints[:, 0]
    rigid = np.einsum("vij,vj->vi", (world @ back.mesh.inverse_bind_matrices)[j][:, :3],
                      np.c_[back.mesh.positions, np.ones(back.mesh.n_vertices)])
    np.testing.assert_allclose(back.mesh.skinned_positions(back.skeleton, got.pose[100]), rigid, atol=1e-9 * scale)


def test_clip_times_validation() -> None:
    pose = Pose(np.zeros((3, 1, 3)), np.tile([0, 0, 0, 1.0], (3, 1, 1)))
    assert Clip(pose, 2.0, times=np.array([0.0, 0.5, 2.0])).duration == 2.0
    assert Clip(pose, 2.0).duration == 1.0
    with pytest.raises(kinema.ShapeError):
        Clip(pose, 2.0, times=np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="strictly increasing"):
        Clip(pose, 2.0, times=np.array([0.0, 1.0, 1.0]))


# ============================================================ file structure
def _check_structure(data: bytes) -> None:
    """What the glTF spec requires of our output (checked here because no validator may be installed)."""
    if data[:4] == b"glTF":
        magic, version, length = struct.unpack_from("<4sII", data)
        assert version == 2 and length == len(data)
        jlen, jtype = struct.unpack_from("<II", data, 12)
        assert jtype == 0x4E4F534A and jlen % 4 == 0
        doc = json.loads(data[20:20 + jlen])
        blen, btype = struct.unpack_from("<II", data, 20 + jlen)
        assert btype == 0x004E4942 and blen % 4 == 0 and 28 + jlen + blen == len(data)
        binary = data[28 + jlen:28 + jlen + blen]
        assert "uri" not in doc["buffers"][0]
    else:
        doc = json.loads(data)
        binary = base64.b64decode(doc["buffers"][0]["uri"].split(",", 1)[1], validate=True)
    assert doc["asset"]["version"] == "2.0"
    assert len(doc["buffers"]) == 1 and doc["buffers"][0]["byteLength"] <= len(binary)
    assert len(binary) - doc["buffers"][0]["byteLength"] < 4
    for bv in doc["bufferViews"]:
        assert bv["byteOffset"] % 4 == 0 and bv["byteOffset"] + bv["byteLength"] <= doc["buffers"][0]["byteLength"]
    vertex_views = {a for m in doc.get("meshes", []) for p in m["primitives"] for a in p["attributes"].values()}
    index_views = {p["indices"] for m in doc.get("meshes", []) for p in m["primitives"]}
    for i, acc in enumerate(doc["accessors"]):
        for key in ("bufferView", "componentType", "count", "type"):
            assert key in acc
        bv = doc["bufferViews"][acc["bufferView"]]
        target = bv.get("target")
        if i in vertex_views:
            assert target == 34962
        elif i in index_views:
            assert target == 34963
        else:
            assert target is None  # IBMs and animation data have no target
    for m in doc.get("meshes", []):
        for p in m["primitives"]:
            acc = doc["accessors"][p["attributes"]["POSITION"]]
            bv = doc["bufferViews"][acc["bufferView"]]
            pos = np.frombuffer(binary, dtype="<f4", count=acc["count"] * 3, offset=bv["byteOffset"]).reshape(-1, 3)
            assert acc["min"] == pos.min(axis=0).tolist() and acc["max"] == pos.max(axis=0).tolist()
    for a in doc.get("animations", []):
        for s in a["samplers"]:
            assert "min" in doc["accessors"][s["input"]] and "max" in doc["accessors"][s["input"]]
    for n in doc["nodes"]:
        assert not ("matrix" in n and "translation" in n)


def _outputs(shared_data: Path, tmp_path: Path, rng: np.random.Generator) -> list[Path]:
    out = []
    for name in FILES:
        a = load_gltf(_gltf_path(shared_data, name))
        clips = dict(a.clips)
        clips["new"] = _new_clip(a.skeleton, rng, 6)
        for ext in (".gltf", ".glb"):
            p = tmp_path / f"{Path(name).stem}{ext}"
            save_gltf(p, a.skeleton, clips)
            out.append(p)
    from kinema.io import load_bvh

    bsk, bclip = load_bvh(shared_data / "bvh" / "test_mocapbank.bvh")
    p = tmp_path / "mocap.glb"
    save_gltf(p, bsk, {"mocap": bclip}, mesh="bones")
    out.append(p)
    sk = _chain_skeleton()
    for mesh in ("bones", False):
        p = tmp_path / f"chain_{mesh}.glb"
        save_gltf(p, sk, {"take": _new_clip(sk, rng, 4)}, mesh=mesh)
        out.append(p)
    return out


def test_written_files_are_structurally_valid(shared_data: Path, tmp_path: Path, rng: np.random.Generator) -> None:
    for p in _outputs(shared_data, tmp_path, rng):
        _check_structure(p.read_bytes())


VALIDATOR_JS = """
const v = require('gltf-validator'); const fs = require('fs');
const files = process.argv.slice(2); const out = {};
(async () => {
  for (const f of files) {
    const r = await v.validateBytes(new Uint8Array(fs.readFileSync(f)), {uri: f, maxIssues: 50});
    out[f] = {errors: r.issues.numErrors, warnings: r.issues.numWarnings,
              messages: r.issues.messages.map(m => m.code + ' ' + m.pointer + ' ' + m.message)};
  }
  console.log(JSON.stringify(out));
})().catch(e => { console.error(e); process.exit(2); });
"""


def _validator_dir(cache: pytest.Cache) -> Path:
    """A folder with node_modules/gltf-validator: $KINEMA_GLTF_VALIDATOR, or installed once into the pytest cache."""
    env = os.environ.get("KINEMA_GLTF_VALIDATOR")
    if env:
        return Path(env)
    folder = cache.mkdir("gltf-validator")
    if not (folder / "node_modules" / "gltf-validator").is_dir():
        npm = shutil.which("npm")
        assert npm is not None
        res = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder), "gltf-validator"],
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, f"npm install gltf-validator failed: {res.stderr[-2000:]}"
    return folder


@pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None, reason="needs node and npm")
def test_khronos_validator_accepts_written_files(shared_data: Path, tmp_path: Path, rng: np.random.Generator,
                                                 pytestconfig: pytest.Config) -> None:
    assert pytestconfig.cache is not None
    folder = _validator_dir(pytestconfig.cache)
    script = folder / "kinema_validate.js"
    script.write_text(VALIDATOR_JS)
    files = _outputs(shared_data, tmp_path, rng)
    res = subprocess.run(["node", str(script), *map(str, files)], capture_output=True, text=True, timeout=300,
                         cwd=folder)
    assert res.returncode == 0, res.stderr[-2000:]
    report = json.loads(res.stdout)
    for f in map(str, files):
        assert report[f]["errors"] == 0 and report[f]["warnings"] == 0, (f, report[f]["messages"])


# ============================================================ bad files
def _mutated(shared_data: Path, tmp_path: Path, mutate: Any, name: str = "RiggedSimple.gltf") -> Path:
    doc = json.loads(_gltf_path(shared_data, name).read_text())
    mutate(doc)
    p = tmp_path / "bad.gltf"
    p.write_text(json.dumps(doc))
    return p


def _set(path: str, value: Any) -> Any:
    def f(doc: dict[str, Any]) -> None:
        *head, last = path.split(".")
        obj: Any = doc
        for k in head:
            obj = obj[int(k)] if k.isdigit() else obj[k]
        if value is _DELETE:
            del obj[int(last) if last.isdigit() else last]
        else:
            obj[int(last) if last.isdigit() else last] = value
    return f


_DELETE = object()

BAD_CASES = [
    (_set("accessors.9.count", 10_000), r"accessors\[9\]\.count"),
    (_set("accessors.9.count", "two"), r"accessors\[9\]\.count.*integer"),
    (_set("accessors.9.componentType", 5124), r"accessors\[9\]\.componentType"),
    (_set("accessors.9.type", "MAT5"), r"accessors\[9\]\.type"),
    (_set("accessors.9.bufferView", 99), r"accessors\[9\]\.bufferView.*bufferViews\[99\]"),
    (_set("accessors.9.type", "VEC4"), r"accessors\[9\]\.type.*inverseBindMatrices"),
    (_set("bufferViews.3.byteLength", 1_000_000), r"bufferViews\[3\]\.byteLength"),
    (_set("buffers.0.byteLength", 10), r"accessors\[\d+\]\.count|bufferViews\[\d+\]\.byteLength"),
    (_set("buffers.0.byteLength", 100_000), r"buffers\[0\]\.byteLength"),
    (_set("buffers.0.uri", "data:application/octet-stream;base64,@@@@"), r"buffers\[0\]\.uri.*base64"),
    (_set("buffers.0.uri", "missing.bin"), r"buffers\[0\]\.uri.*cannot read"),
    (_set("buffers.0.uri", "http://example.com/x.bin"), r"buffers\[0\]\.uri"),
    (_set("buffers.0.uri", _DELETE), r"buffers\[0\]"),
    (_set("skins.0.joints.1", 42), r"skins\[0\]\.joints\[1\]"),
    (_set("skins.0.joints", []), r"skins\[0\]\.joints"),
    (_set("nodes.3.children", [3]), r"nodes\[3\]\.children\[0\]"),
    (_set("nodes.4.children", [0]), r"nodes\[4\]\.children\[0\]|cycle"),
    (_set("nodes.4.rotation", [0, 0, 0, 0]), r"nodes\[4\]\.rotation.*zero"),
    (_set("nodes.4.scale", [1, 0, 1]), r"nodes\[4\]\.scale"),
    (_set("nodes.3.translation", [0, 0, 0]), r"nodes\[3\].*matrix and"),
    (_set("nodes.0.matrix", [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, -1, 0, 0, 0, 0, 1]), r"nodes\[0\].*mirror"),
    (_set("nodes", {}), r"^.*nodes: must be an array"),
    (_set("nodes.4.scale", [1e-300, 1e-300, 1e-300]), r"nodes: .*collapse"),  # underflows to a singular world
    (_set("nodes.3.matrix", [1e200, 0, 0, 0, 0, 1e200, 0, 0, 0, 0, 1e200, 0, 0, 0, 0, 1]),
     r"nodes\[3\]\.matrix.*too large"),
    (_set("animations.0.samplers.0.interpolation", "BEZIER"), r"samplers\[0\]\.interpolation"),
    (_set("animations.0.channels.0.target.path", "color"), r"channels\[0\]\.target\.path"),
    (_set("animations.0.channels.0.sampler", 7), r"channels\[0\]\.sampler"),
    (_set("animations.0.samplers.0.output", 5), r"accessors\[5\]\.type"),
    (_set("asset", {"version": "1.0"}), r"asset\.version"),
    (_set("asset", _DELETE), r"asset\.version"),
    (_set("meshes.0.primitives.0.indices", 3), r"accessors\[3\]\.type"),
    (_set("meshes.0.primitives.0.attributes.JOINTS_0", _DELETE), r"JOINTS_0"),
]


@pytest.mark.parametrize(("mutate", "where"), BAD_CASES)
def test_bad_files_name_the_json_path(shared_data: Path, tmp_path: Path, mutate: Any, where: str) -> None:
    p = _mutated(shared_data, tmp_path, mutate)
    with pytest.raises(FileFormatError, match=where) as info:
        load_gltf(p)
    assert info.value.path == str(p)
    assert str(p) in str(info.value)


def _patch_accessor(doc: dict[str, Any], i: int, values: np.ndarray) -> None:
    """Overwrite accessor ``i``'s bytes in the embedded buffer."""
    acc = doc["accessors"][i]
    bv = doc["bufferViews"][acc["bufferView"]]
    data = bytearray(base64.b64decode(doc["buffers"][0]["uri"].split(",", 1)[1]))
    raw = np.ascontiguousarray(values).tobytes()
    off = bv.get("byteOffset", 0) + acc.get("byteOffset", 0)
    data[off:off + len(raw)] = raw
    doc["buffers"][0]["uri"] = "data:application/octet-stream;base64," + base64.b64encode(bytes(data)).decode()


def test_huge_quaternion_is_normalised_without_overflow(shared_data: Path, tmp_path: Path) -> None:
    a = load_gltf(_mutated(shared_data, tmp_path, _set("nodes.4.rotation", [1e308, 1e308, 0, 0])))
    assert kinema.rotation.equal(a.skeleton.rotations[1], [np.sqrt(0.5), np.sqrt(0.5), 0, 0])


def test_out_of_range_indices_and_bad_data(shared_data: Path, tmp_path: Path) -> None:
    doc = json.loads(_gltf_path(shared_data, "RiggedSimple.gltf").read_text())
    prim = doc["meshes"][0]["primitives"][0]

    def joints_oob(d: dict[str, Any]) -> None:
        j = np.zeros((160, 4), dtype="<u2")
        j[17, 2] = 5
        _patch_accessor(d, prim["attributes"]["JOINTS_0"], j)

    def vertex_oob(d: dict[str, Any]) -> None:
        idx = _raw_accessor(d, prim["indices"]).astype("<u2")
        idx[40] = 999
        _patch_accessor(d, prim["indices"], idx)

    def nan_time(d: dict[str, Any]) -> None:
        t = _raw_accessor(d, 5).astype("<f4")
        t[3] = np.nan
        _patch_accessor(d, 5, t)

    def unsorted_time(d: dict[str, Any]) -> None:
        t = _raw_accessor(d, 5).astype("<f4")
        t[[3, 4]] = t[[4, 3]]
        _patch_accessor(d, 5, t)

    cases = [(joints_oob, r"accessors\[1\].*joint index 5"), (vertex_oob, r"accessors\[0\].*vertex index 999"),
             (nan_time, r"accessors\[5\].*NaN"), (unsorted_time, r"accessors\[5\].*strictly increase")]
    for mutate, where in cases:
        with pytest.raises(FileFormatError, match=where):
            load_gltf(_mutated(shared_data, tmp_path, mutate))


def test_bad_json_text_and_glb_container(shared_data: Path, tmp_path: Path) -> None:
    text = _gltf_path(shared_data, "RiggedSimple.gltf").read_text()
    p = tmp_path / "bad.gltf"
    lines = text.splitlines()
    p.write_text("\n".join(lines[:3] + ["  ,,"] + lines[3:]))
    with pytest.raises(FileFormatError, match=r"bad\.gltf:4: invalid JSON") as info:
        load_gltf(p)
    assert info.value.line == 4
    p.write_bytes(b'{"asset": {"version": "2.0"}, "x": "\xff\xfe"}')
    with pytest.raises(FileFormatError, match="UTF-8"):
        load_gltf(p)
    p.write_text('{"asset": {"version": "2.0"}, "x": NaN}')
    with pytest.raises(FileFormatError, match="NaN is not valid JSON"):
        load_gltf(p)
    p.write_text("[1, 2]")
    with pytest.raises(FileFormatError, match="JSON object"):
        load_gltf(p)
    glb = _to_glb(json.loads(text))
    g = tmp_path / "x.glb"
    for data, where in [(glb[:-20], "truncated"), (glb[:8], "12"),
                        (glb[:4] + struct.pack("<I", 1) + glb[8:], "version"),
                        (glb[:12] + struct.pack("<I", 10**6) + glb[16:], "GLB chunk 0"),
                        (glb[:16] + b"BIN\0" + glb[20:], "first chunk must be JSON")]:
        g.write_bytes(data)
        with pytest.raises(FileFormatError, match=where):
            load_gltf(g)
    g.write_bytes(glb)
    assert load_gltf(g).skeleton.n_joints == 2


# ----------------------------------------------------------------- fuzzing
# Example counts come from the hypothesis profile (conftest: 60, "thorough": 500).
_FUZZ_SETTINGS = settings(deadline=None, suppress_health_check=list(HealthCheck))


_REAL_DOCS: dict[str, dict[str, Any]] = {}


def _doc(shared_data: Path, name: str) -> dict[str, Any]:
    if name not in _REAL_DOCS:
        _REAL_DOCS[name] = json.loads(_gltf_path(shared_data, name).read_text())
    return copy.deepcopy(_REAL_DOCS[name])


_JUNK = st.one_of(st.none(), st.booleans(), st.integers(-3, 2**33), st.floats(allow_nan=False, allow_infinity=False),
                  st.text(max_size=5), st.lists(st.integers(-2, 30), max_size=5), st.just({}), st.just([]))


def _load_or_format_error(path: Path) -> None:
    try:
        asset = load_gltf(path)
    except FileFormatError:
        return
    # It loaded: what came out is usable (finite rest pose, unit rotations, FK runs).
    sk = asset.skeleton
    assert np.all(np.isfinite(sk.translations)) and np.all(np.isfinite(sk.rotations))
    assert np.all(np.isfinite(forward_kinematics(sk, sk.rest_pose()).positions))
    for clip in asset.clips.values():
        assert np.all(np.isfinite(clip.pose.rotations))


@_FUZZ_SETTINGS
@given(data=st.data(), name=st.sampled_from(FILES))
def test_fuzz_json_values(shared_data: Path, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject,
                          name: str) -> None:
    """Replace 1-3 JSON values of a real file with junk: it loads or raises FileFormatError, nothing else."""
    doc = _doc(shared_data, name)
    for _ in range(data.draw(st.integers(1, 3))):
        leaves = [p for p in json_leaves(doc) if p]
        where = data.draw(st.sampled_from(leaves))
        obj: Any = doc
        for k in where[:-1]:
            obj = obj[k]
        if data.draw(st.booleans()) and isinstance(obj, dict):
            del obj[where[-1]]
        else:
            obj[where[-1]] = data.draw(_JUNK)
    p = tmp_path_factory.mktemp("fuzz") / "f.gltf"
    p.write_text(json.dumps(doc))
    _load_or_format_error(p)


@_FUZZ_SETTINGS
@given(data=st.data(), name=st.sampled_from(FILES), as_glb=st.booleans())
def test_fuzz_bytes(shared_data: Path, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, name: str,
                    as_glb: bool) -> None:
    """Flip, drop or insert bytes of a real file (text or GLB, binary chunk included)."""
    raw = bytearray(_to_glb(_doc(shared_data, name)) if as_glb else _gltf_path(shared_data, name).read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        op = data.draw(st.sampled_from(["flip", "drop", "insert", "truncate"]))
        if op == "flip":
            raw[i] = data.draw(st.integers(0, 255))
        elif op == "drop":
            del raw[i:i + data.draw(st.integers(1, 8))]
        elif op == "insert":
            raw[i:i] = data.draw(st.binary(min_size=1, max_size=4))
        else:
            del raw[i:]
        if not raw:
            raw = bytearray(b"{")
    p = tmp_path_factory.mktemp("fuzzb") / ("f.glb" if as_glb else "f.gltf")
    p.write_bytes(bytes(raw))
    _load_or_format_error(p)


# ============================================================ NUMBA_DISABLE_JIT
def test_load_matches_without_jit(shared_data: Path, tmp_path: Path) -> None:
    """The loader's rotation kernels (matrix -> quaternion, slerp, fold) run as plain Python too, same result."""
    path = _gltf_path(shared_data, "RiggedSimple.gltf")
    code = ("import sys, numpy as np; from kinema.io import load_gltf; a = load_gltf(sys.argv[1], fps=30); "
            "c = a.clips['animation_0'].pose; np.savez(sys.argv[2], t=a.skeleton.translations, "
            "r=a.skeleton.rotations, ct=c.translations, cr=c.rotations, cs=c.scales)")
    out = tmp_path / "nojit.npz"
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    subprocess.run([sys.executable, "-c", code, str(path), str(out)], check=True, env=env, timeout=300)
    ref = load_gltf(path, fps=30)
    got = np.load(out)
    c = ref.clips["animation_0"].pose
    np.testing.assert_allclose(got["t"], ref.skeleton.translations, atol=1e-14)
    np.testing.assert_allclose(got["r"], ref.skeleton.rotations, atol=1e-14)
    np.testing.assert_allclose(got["ct"], c.translations, atol=1e-14)
    np.testing.assert_allclose(got["cr"], c.rotations, atol=1e-14)
    np.testing.assert_allclose(got["cs"], c.scales, atol=1e-14)
