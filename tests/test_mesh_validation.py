"""SkinnedMesh checks its arrays when it is made (and save_gltf again before writing), naming the field.

A mesh that passes is what glTF skinning needs: finite positions (normals, uvs), integer triangle indices
below the vertex count, integer joint indices below the inverse bind matrix count, weights >= 0 whose rows
sum to 1 (:data:`kinema.mesh.WEIGHT_SUM_TOL`).  The glTF loader builds one from every file it reads, so a file
whose weights do not sum to 1 (many exporters write such files) is repaired there, with a note.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kinema
from kinema import FileFormatError, ShapeError, Skeleton, SolverInputError
from kinema.io import load_gltf, save_gltf
from kinema.mesh import WEIGHT_SUM_TOL, SkinnedMesh, bone_mesh

pytest.importorskip("pygltflib")


def good(**change: Any) -> dict[str, Any]:
    """A valid mesh's arguments (4 vertices, 2 triangles, 2 joints), with ``change`` applied."""
    ibm = np.tile(np.eye(4), (2, 1, 1))
    ibm[1, 1, 3] = -1.0
    args: dict[str, Any] = dict(
        positions=np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0]]),
        indices=np.array([[0, 1, 2], [2, 1, 3]]),
        joints=np.array([[0, 1, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]]),
        weights=np.array([[0.75, 0.25, 0, 0], [0.5, 0.5, 0, 0], [1.0, 0, 0, 0], [1.0, 0, 0, 0]]),
        inverse_bind_matrices=ibm,
        normals=np.tile([0.0, 0.0, 1.0], (4, 1)),
        uvs=np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
        name="quad",
    )
    args.update(change)
    return args


def _with(field: str, index: tuple[int, ...], value: float) -> dict[str, Any]:
    """``{field: the good array of that float field with [index] = value}``."""
    arr = np.array(good()[field], dtype=float)
    arr[index] = value
    return {field: arr}


# (change, error, message): each a mesh that must not be made.
BAD: list[tuple[dict[str, Any], type[Exception], str]] = [
    # shapes: expected versus got
    ({"positions": np.zeros((4, 2))}, ShapeError, r"mesh 'quad' positions: expected shape \(V, 3\), got \(4, 2\)"),
    ({"positions": np.zeros(12)}, ShapeError, r"positions: expected shape \(V, 3\), got \(12,\)"),
    ({"indices": np.array([0, 1, 2])}, ShapeError, r"indices: expected shape \(T, 3\), got \(3,\)"),
    ({"indices": np.array([[0, 1, 2, 3]])}, ShapeError, r"indices: expected shape \(T, 3\), got \(1, 4\)"),
    ({"joints": np.zeros((3, 4), dtype=int)}, ShapeError,
     r"joints: expected shape \(4, K\) \(one row per vertex\), got \(3, 4\)"),
    ({"weights": np.ones((4, 2)) / 2}, ShapeError, r"weights: expected shape \(4, 4\) \(as joints\), got \(4, 2\)"),
    ({"inverse_bind_matrices": np.eye(4)}, ShapeError, r"inverse_bind_matrices: expected shape \(J, 4, 4\), "
                                                       r"got \(4, 4\)"),
    ({"normals": np.zeros((3, 3))}, ShapeError, r"normals: expected shape \(4, 3\), got \(3, 3\)"),
    ({"uvs": np.zeros((4, 3))}, ShapeError, r"uvs: expected shape \(4, 2\), got \(4, 3\)"),
    # not numbers
    ({"positions": [["a", "b", "c"]] * 4}, ShapeError, "positions: .*non-numeric"),
    ({"joints": np.zeros((4, 4), dtype=bool)}, ShapeError, "joints: .*non-numeric"),
    ({"weights": None}, ShapeError, "weights: .*non-numeric"),
    # values: NaN, inf
    (_with("positions", (2, 1), np.nan), SolverInputError, r"mesh 'quad' positions contains NaN or inf .*\(2, 1\)"),
    (_with("normals", (0, 0), np.inf), SolverInputError, r"normals contains NaN or inf .*\(0, 0\)"),
    (_with("uvs", (3, 1), np.nan), SolverInputError, r"uvs contains NaN or inf .*\(3, 1\)"),
    (_with("inverse_bind_matrices", (1, 0, 3), np.inf), SolverInputError,
     r"inverse_bind_matrices contains NaN or inf .*\(1, 0, 3\)"),
    (_with("weights", (1, 0), np.nan), SolverInputError, r"weights contains NaN or inf .*\(1, 0\)"),
    # weights: negative, rows not summing to 1
    ({"weights": np.array([[1.25, -0.25, 0, 0], [0.5, 0.5, 0, 0], [1.0, 0, 0, 0], [1.0, 0, 0, 0]])},
     SolverInputError, r"mesh 'quad' weights\[0, 1\] is -0\.25: skin weights must be >= 0"),
    ({"weights": np.array([[0.75, 0.25, 0, 0], [0.5, 0.25, 0, 0], [1.0, 0, 0, 0], [1.0, 0, 0, 0]])},
     SolverInputError, r"mesh 'quad' weights: row 1 sums to 0\.75; each vertex's weights must sum to 1"),
    ({"weights": np.array([[0.75, 0.25, 0, 0], [0.5, 0.5, 0, 0], [0.0, 0, 0, 0], [1.0, 0, 0, 0]])},
     SolverInputError, r"weights: row 2 sums to 0"),
    ({"weights": np.array([[1.0, 1.0, 0, 0]] * 4)}, SolverInputError, r"weights: row 0 sums to 2"),
    # joint indices: fractional, NaN, out of range of the inverse bind matrices
    ({"joints": np.array([[0, 1, 0, 0], [0, 0.5, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]])}, SolverInputError,
     r"mesh 'quad' joints\[1, 1\] is 0\.5: joint indices must be whole numbers"),
    ({"joints": np.array([[0, 1, 0, 0], [0, 1, 0, 0], [1, 0, np.nan, 0], [1, 0, 0, 0]])}, SolverInputError,
     r"joints contains NaN or inf .*\(2, 2\)"),
    ({"joints": np.array([[0, 2, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]])}, SolverInputError,
     r"mesh 'quad' joints\[0, 1\] is 2: out of range for 2 joints \(inverse_bind_matrices\)"),
    ({"joints": np.array([[0, 1, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0], [1, -1, 0, 0]])}, SolverInputError,
     r"joints\[3, 1\] is -1: out of range for 2 joints"),
    ({"joints": np.array([[0, 1, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0], [1, 0, 0, 2**40]], dtype=np.uint64)},
     SolverInputError, r"joints\[3, 3\] is 1099511627776: out of range"),
    ({"joints": np.full((4, 4), 1e300)}, SolverInputError, r"joints\[0, 0\] is 1e\+300: out of range"),
    # triangle indices: fractional, past the vertex count, negative
    ({"indices": np.array([[0, 1, 2], [2, 1, 4]])}, SolverInputError,
     r"mesh 'quad' indices\[1, 2\] is 4: out of range for 4 vertices \(positions\)"),
    ({"indices": np.array([[0, -1, 2], [2, 1, 3]])}, SolverInputError, r"indices\[0, 1\] is -1: out of range"),
    ({"indices": np.array([[0, 1, 2], [2, 1.5, 3]])}, SolverInputError,
     r"indices\[1, 1\] is 1\.5: vertex indices must be whole numbers"),
]


@pytest.mark.parametrize(("change", "error", "message"), BAD, ids=[m[:40] for _, _, m in BAD])
def test_bad_meshes_are_refused_naming_the_field(change: dict[str, Any], error: type[Exception],
                                                 message: str) -> None:
    with pytest.raises(error, match=message):
        SkinnedMesh(**good(**change))
    # dataclasses.replace makes a new mesh: checked the same way (kinema.cli scales meshes so)
    with pytest.raises(error, match=message):
        dataclasses.replace(SkinnedMesh(**good()), **change)


def test_errors_are_kinema_errors_not_bare_value_errors() -> None:
    for change, _, _ in BAD:
        with pytest.raises(kinema.KinemaError):
            SkinnedMesh(**good(**change))


def test_weight_sums_within_the_tolerance_pass() -> None:
    w = good()["weights"].copy()
    w[0, :2] = [0.75 + 0.9 * WEIGHT_SUM_TOL, 0.25]
    w[1, :2] = [0.5 - 0.9 * WEIGHT_SUM_TOL, 0.5]
    mesh = SkinnedMesh(**good(weights=w))
    np.testing.assert_array_equal(mesh.weights, w)  # kept as given, not renormalised
    w[1, 0] = 0.5 - 1.1 * WEIGHT_SUM_TOL
    with pytest.raises(SolverInputError, match="row 1 sums to 0.99998"):
        SkinnedMesh(**good(weights=w))


def test_ints_float32_and_big_endian_are_read_as_the_numbers_they_hold() -> None:
    ref = SkinnedMesh(**good())
    args = good()
    odd = SkinnedMesh(
        positions=args["positions"].astype(">i4").tolist(),  # a list of ints
        indices=args["indices"].astype(">u2"),
        joints=args["joints"].astype(">i8"),
        weights=args["weights"].astype(np.float32),
        inverse_bind_matrices=args["inverse_bind_matrices"].astype(">f8"),
        normals=args["normals"].astype(">f4"),
        uvs=args["uvs"].astype(np.float16),
        name="quad",
    )
    for field in ("positions", "weights", "inverse_bind_matrices", "normals", "uvs"):
        got = getattr(odd, field)
        assert got.dtype == np.float64 and got.dtype.isnative, field
        np.testing.assert_array_equal(got, getattr(ref, field), err_msg=field)
    for field in ("indices", "joints"):
        got = getattr(odd, field)
        assert got.dtype == np.int64 and got.dtype.isnative, field
        np.testing.assert_array_equal(got, getattr(ref, field), err_msg=field)
    # whole numbers stored as floats are indices too
    floaty = SkinnedMesh(**good(joints=args["joints"].astype(np.float32), indices=args["indices"].astype(float)))
    assert floaty.joints.dtype == np.int64 and floaty.indices.dtype == np.int64
    np.testing.assert_array_equal(floaty.joints, ref.joints)
    np.testing.assert_array_equal(floaty.indices, ref.indices)
    # float64 / int64 arrays are kept as given (no copy): the loader's arrays cost nothing more
    same = good()
    kept = SkinnedMesh(**same)
    assert kept.positions is same["positions"] and kept.weights is same["weights"] and kept.joints is same["joints"]


def test_every_mesh_kinema_makes_passes(shared_data: Path) -> None:
    sk = kinema.samples.humanoid(hands=True)
    mesh = bone_mesh(sk)
    np.testing.assert_allclose(mesh.weights.sum(axis=1), 1.0, rtol=0, atol=0)
    for name in ("RiggedSimple.gltf", "RiggedFigure.gltf", "RiggedSimple-2e6fed56.gltf"):
        asset = load_gltf(shared_data / "gltf" / name)
        assert asset.mesh is not None and asset.notes == ()
        assert float(np.max(np.abs(asset.mesh.weights.sum(axis=1) - 1.0))) <= 2e-7  # float32 sums, as in the file


# ------------------------------------------------------------------ save_gltf checks again
def test_save_gltf_refuses_a_mesh_broken_after_it_was_made(tmp_path: Path) -> None:
    """The arrays are numpy arrays and can be changed in place: save_gltf checks them again before writing."""
    sk = Skeleton(["root", "tip"], [-1, 0], [[0, 0, 0], [0, 1, 0]])
    clip = kinema.Clip(kinema.Pose(sk.translations[None], sk.rotations[None]), fps=30.0)
    for field, index, value, message in (
            ("weights", (0, 1), -0.25, r"weights\[0, 1\] is -0\.25"),
            ("weights", (2, 0), np.nan, r"weights contains NaN or inf"),
            ("joints", (1, 0), 5, r"joints\[1, 0\] is 5: out of range for 2 joints"),
            ("indices", (0, 0), 9, r"indices\[0, 0\] is 9: out of range for 4 vertices")):
        mesh = SkinnedMesh(**good())
        getattr(mesh, field)[index] = value
        out = tmp_path / f"{field}.glb"
        with pytest.raises(SolverInputError, match=f"mesh 'quad' {message}"):
            save_gltf(out, sk, clip, mesh=mesh)
        assert not out.exists()
    ok = SkinnedMesh(**good())
    save_gltf(tmp_path / "ok.glb", sk, clip, mesh=ok)
    back = load_gltf(tmp_path / "ok.glb").mesh
    assert back is not None
    np.testing.assert_array_equal(back.indices, ok.indices)
    np.testing.assert_allclose(back.weights, ok.weights, rtol=0, atol=0)  # 0.75, 0.25, 0.5: exact in float32


def test_save_gltf_checks_the_joint_count_against_the_skeleton(tmp_path: Path) -> None:
    sk = Skeleton(["root", "mid", "tip"], [-1, 0, 1], [[0, 0, 0], [0, 1, 0], [0, 1, 0]])
    clip = kinema.Clip(kinema.Pose(sk.translations[None], sk.rotations[None]), fps=30.0)
    with pytest.raises(ShapeError, match=r"inverse_bind_matrices: expected shape \(3, 4, 4\) .*got \(2, 4, 4\)"):
        save_gltf(tmp_path / "x.glb", sk, clip, mesh=SkinnedMesh(**good()))


# ------------------------------------------------------------------ files: weights the loader repairs or refuses
def _weights_file(tmp_path: Path, weights: np.ndarray, name: str) -> Path:
    """A .gltf that save_gltf wrote from the good mesh, with its WEIGHTS_0 data replaced by ``weights``."""
    sk = Skeleton(["root", "tip"], [-1, 0], [[0, 0, 0], [0, 1, 0]])
    src = tmp_path / "src.gltf"
    save_gltf(src, sk, mesh=SkinnedMesh(**good()))
    doc = json.loads(src.read_text())
    acc = doc["accessors"][doc["meshes"][0]["primitives"][0]["attributes"]["WEIGHTS_0"]]
    view = doc["bufferViews"][acc["bufferView"]]
    head, payload = doc["buffers"][0]["uri"].split(",", 1)
    data = bytearray(base64.b64decode(payload))
    raw = np.ascontiguousarray(weights, dtype="<f4").tobytes()
    assert len(raw) == view["byteLength"]
    data[view["byteOffset"]: view["byteOffset"] + len(raw)] = raw
    doc["buffers"][0]["uri"] = head + "," + base64.b64encode(bytes(data)).decode()
    out = tmp_path / name
    out.write_text(json.dumps(doc))
    return out


def test_loader_divides_weights_by_their_sum_with_a_note(tmp_path: Path) -> None:
    """Blender and other exporters write weights that do not sum to 1 (influences cut to 4, not renormalised);
    the file still loads, each such row divided by its sum (as three.js does), and notes say which."""
    w = good()["weights"].copy()
    w[1, :2] = [0.25, 0.25]  # sums to 0.5
    w[3, 0] = 0.8  # sums to 0.8
    asset = load_gltf(_weights_file(tmp_path, w, "unnormalised.gltf"))
    assert asset.mesh is not None
    want = good()["weights"].copy()
    want[3, 0] = 1.0
    np.testing.assert_array_equal(asset.mesh.weights, want)  # x / x is 1 exactly, 0.25 / 0.5 is 0.5 exactly
    assert any("2 vertices" in n and "WEIGHTS" in n and "divided by their sum" in n for n in asset.notes)


def test_loader_binds_vertices_without_weight_to_their_first_joint(tmp_path: Path) -> None:
    w = good()["weights"].copy()
    w[0] = 0.0
    asset = load_gltf(_weights_file(tmp_path, w, "unweighted.gltf"))
    assert asset.mesh is not None
    np.testing.assert_array_equal(asset.mesh.weights[0], [1.0, 0.0, 0.0, 0.0])
    assert asset.mesh.joints[0, 0] == 0
    assert any("1 vertex has no skin weight" in n for n in asset.notes)


def test_loader_refuses_negative_weights_at_their_accessor(tmp_path: Path) -> None:
    w = good()["weights"].copy()
    w[2, :2] = [1.5, -0.5]
    path = _weights_file(tmp_path, w, "negative.gltf")
    with pytest.raises(FileFormatError, match=r"negative.gltf at accessors\[\d+\]: skin weight -0\.5 .*vertex 2"):
        load_gltf(path)
