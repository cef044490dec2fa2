"""kinema.mesh: the one skinned mesh class and its linear blend skinning, shared by kinema.io and the viewer.

References are independent of kinema.mesh: skinning written as a per-vertex loop, bind transforms
composed back into matrices. Tolerances: float64 products of a few 4x4 matrices, 1e-12 absolute
(values of order 1); float32 for what goes through a glTF file (1e-6 relative).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kinema
from kinema import Pose, Skeleton, forward_kinematics, io
from kinema import rotation as R
from kinema.mesh import SkinnedMesh, bone_mesh, linear_blend_skinning

pytest.importorskip("pygltflib")

#: float64 agreement of a few 4x4 products on values of order 1.
F64_ATOL = 1e-12


def _random_similarities(rng: np.random.Generator, n: int) -> np.ndarray:
    """``(n, 4, 4)`` rotation times a uniform scale in [0.5, 2], plus a translation."""
    m = np.tile(np.eye(4), (n, 1, 1))
    m[:, :3, :3] = R.as_matrix(R.normalize(rng.normal(size=(n, 4)))) * rng.uniform(0.5, 2.0, size=(n, 1, 1))
    m[:, :3, 3] = rng.normal(size=(n, 3))
    return m


def test_linear_blend_skinning_matches_a_per_vertex_loop(rng: np.random.Generator) -> None:
    n_v, n_j, k = 30, 5, 4
    positions = rng.normal(size=(n_v, 3))
    joints = rng.integers(0, n_j, size=(n_v, k))
    weights = rng.uniform(size=(n_v, k))
    weights /= weights.sum(axis=1, keepdims=True)
    skin = np.stack([_random_similarities(rng, n_j) for _ in range(3)])  # a batch of 3 poses
    got = linear_blend_skinning(positions, joints, weights, skin)
    assert got.shape == (3, n_v, 3)
    for b in range(3):
        for v in range(n_v):
            want = sum(weights[v, i] * (skin[b, joints[v, i]] @ np.append(positions[v], 1.0))[:3] for i in range(k))
            np.testing.assert_allclose(got[b, v], want, rtol=0.0, atol=F64_ATOL)


def test_bind_transforms_invert_the_inverse_bind_matrices(rng: np.random.Generator) -> None:
    world_bind = _random_similarities(rng, 6)
    mesh = SkinnedMesh(positions=np.zeros((1, 3)), indices=np.zeros((0, 3), dtype=np.int64),
                       joints=np.zeros((1, 4), dtype=np.int64), weights=np.array([[1.0, 0, 0, 0]]),
                       inverse_bind_matrices=np.linalg.inv(world_bind))
    np.testing.assert_allclose(mesh.bind_positions, world_bind[:, :3, 3], atol=F64_ATOL)
    scale = np.cbrt(np.linalg.det(world_bind[:, :3, :3]))[:, None, None]
    np.testing.assert_allclose(R.as_matrix(mesh.bind_rotations) * scale, world_bind[:, :3, :3], atol=F64_ATOL)
    np.testing.assert_allclose(np.linalg.norm(mesh.bind_rotations, axis=1), 1.0, atol=F64_ATOL)


def test_skin_weights_are_dense_and_add_repeated_joints() -> None:
    mesh = SkinnedMesh(positions=np.zeros((2, 3)), indices=np.zeros((0, 3), dtype=np.int64),
                       joints=np.array([[0, 2, 2, 0], [1, 0, 0, 0]]),
                       weights=np.array([[0.5, 0.25, 0.25, 0.0], [1.0, 0.0, 0.0, 0.0]]),
                       inverse_bind_matrices=np.tile(np.eye(4), (3, 1, 1)))
    np.testing.assert_array_equal(mesh.skin_weights(3), [[0.5, 0.0, 0.5], [0.0, 1.0, 0.0]])


def test_posing_by_the_change_from_bind_equals_skinning(rng: np.random.Generator) -> None:
    """What the viewer draws (each joint moves its vertices by ``T_now inverse(T_bind)``) is the skinning."""
    sk = Skeleton(["root", "upper", "lower", "tip"], [-1, 0, 1, 2], [[0, 1, 0], [0, 0.5, 0], [0, 0.4, 0], [0, 0.3, 0]])
    mesh = bone_mesh(sk)
    pose = Pose(sk.translations, R.from_rotvec(rng.normal(scale=0.8, size=(sk.n_joints, 3))))
    fk = forward_kinematics(sk, pose)
    r_now, r_bind = R.as_matrix(fk.rotations), R.as_matrix(mesh.bind_rotations)
    moved = np.einsum("jab,jcb,jvc->jva", r_now, r_bind, mesh.positions[None] - mesh.bind_positions[:, None])
    drawn = np.einsum("vj,jva->va", mesh.skin_weights(sk.n_joints), moved + fk.positions[:, None])
    np.testing.assert_allclose(drawn, mesh.skinned_positions(sk, pose), atol=F64_ATOL)


def test_one_mesh_class_for_io_and_viewer(shared_data: Path) -> None:
    assert kinema.io.GltfMesh is SkinnedMesh and kinema.io.bone_mesh is bone_mesh
    asset = kinema.io.load_gltf(shared_data / "gltf" / "RiggedFigure.gltf")
    assert type(asset.mesh) is SkinnedMesh
    from kinema.viewer import SkinnedMesh as ViewerMesh
    from kinema.viewer import load_any

    assert ViewerMesh is SkinnedMesh
    _, _, mesh = load_any(shared_data / "gltf" / "RiggedFigure.gltf")
    assert type(mesh) is SkinnedMesh
    np.testing.assert_array_equal(mesh.positions, asset.mesh.positions)


def test_the_mesh_is_an_explicit_argument_of_save_gltf(shared_data: Path, tmp_path: Path) -> None:
    """A skeleton without the loader's meta (built afresh) keeps the mesh given as ``mesh=``."""
    asset = kinema.io.load_gltf(shared_data / "gltf" / "RiggedFigure.gltf")
    src = asset.skeleton
    bare = Skeleton(src.names, src.parents, src.translations, src.rotations, src.scales)
    assert "gltf_mesh" not in bare.meta
    kinema.io.save_gltf(tmp_path / "no_mesh.glb", bare, asset.clips)
    assert kinema.io.load_gltf(tmp_path / "no_mesh.glb").mesh is None  # nothing given, nothing in meta
    kinema.io.save_gltf(tmp_path / "mesh.glb", bare, asset.clips, mesh=asset.mesh)
    back = kinema.io.load_gltf(tmp_path / "mesh.glb").mesh
    assert back is not None and asset.mesh is not None
    np.testing.assert_allclose(back.positions, asset.mesh.positions, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(back.indices, asset.mesh.indices)
    pose = asset.clips["animation_0"].pose[1]
    np.testing.assert_allclose(back.skinned_positions(bare, pose), asset.mesh.skinned_positions(src, pose),
                               rtol=1e-5, atol=1e-5)


def test_cli_output_takes_the_loaded_mesh_explicitly(shared_data: Path, tmp_path: Path) -> None:
    """The command line hands the mesh it loaded to save_gltf (Motion.mesh), not through skeleton.meta: a
    skeleton without any meta still writes the file's own skinned mesh."""
    from kinema.cli import _files

    m = _files.load_motion(str(shared_data / "gltf" / "RiggedFigure.gltf"))
    assert m.mesh is not None
    bare = kinema.Skeleton(m.skeleton.names, m.skeleton.parents, m.skeleton.translations, m.skeleton.rotations,
                           m.skeleton.scales)
    out = tmp_path / "figure.glb"
    _files.save_motion(str(out), bare, m.clip, loaded_mesh=m.mesh)
    again = io.load_gltf(out)
    assert again.mesh is not None
    np.testing.assert_allclose(again.mesh.positions, m.mesh.positions, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(again.mesh.indices, m.mesh.indices)


def test_linear_blend_skinning_checks_its_arrays() -> None:
    """Mismatched shapes are refused (expected versus got), never broadcast: one vertex's joints for two vertices
    would have skinned both with them."""
    skin = np.tile(np.eye(4), (2, 1, 1))
    ok = dict(positions=np.zeros((2, 3)), joints=np.zeros((2, 1), dtype=np.int64), weights=np.ones((2, 1)),
              skin_matrices=skin)
    np.testing.assert_array_equal(linear_blend_skinning(**ok), np.zeros((2, 3)))
    cases = [
        (dict(joints=np.zeros((1, 1), dtype=np.int64), weights=np.ones((1, 1))), kinema.ShapeError,
         r"joints: expected shape \(2, K\) for 2 vertices, got \(1, 1\)"),
        (dict(weights=np.ones((2, 2))), kinema.ShapeError, r"weights: expected shape \(2, 1\) as joints, got \(2, 2\)"),
        (dict(joints=np.zeros((2, 1))), kinema.ShapeError, "integer joint indices"),
        (dict(positions=np.zeros((2, 2))), kinema.ShapeError, r"positions: expected shape \(\.\.\., 3\), got \(2, 2\)"),
        (dict(skin_matrices=np.eye(4)), kinema.ShapeError, r"skin_matrices: expected shape \(\.\.\., J, 4, 4\)"),
        (dict(joints=np.array([[0], [2]])), kinema.SolverInputError, r"out of range for 2 skin matrices \(index 2\)"),
        (dict(joints=np.array([[0], [-1]])), kinema.SolverInputError, r"\(index -1\)"),
        (dict(positions=np.array([[0.0, np.nan, 0.0], [0.0, 0.0, 0.0]])), kinema.SolverInputError, "positions"),
    ]
    for change, error, message in cases:
        with pytest.raises(error, match=message):
            linear_blend_skinning(**{**ok, **change})


def test_skinned_positions_checks_the_skeleton_and_the_pose() -> None:
    sk = kinema.samples.humanoid()
    mesh = bone_mesh(sk)
    other = kinema.samples.humanoid(hands=True)
    with pytest.raises(kinema.ShapeError, match=r"skeleton: expected shape 15 joints .* got 55 joints"):
        mesh.skinned_positions(other, other.rest_pose())
    pose = sk.rest_pose()
    pose.rotations[3, 0] = np.nan
    with pytest.raises(kinema.SolverInputError, match="skinned_positions: pose has NaN or inf in its rotations"):
        mesh.skinned_positions(sk, pose)
    with pytest.raises(kinema.SolverInputError, match=r"a joint outside the 10 joints asked for \(index 1[0-4]\)"):
        mesh.skin_weights(10)
    singular = SkinnedMesh(positions=np.zeros((1, 3)), indices=np.zeros((0, 3), dtype=np.int64),
                           joints=np.zeros((1, 4), dtype=np.int64), weights=np.array([[1.0, 0.0, 0.0, 0.0]]),
                           inverse_bind_matrices=np.stack([np.eye(4), np.zeros((4, 4))]), name="broken")
    with pytest.raises(kinema.SolverInputError, match=r"mesh 'broken': inverse_bind_matrices\[1\] is singular"):
        _ = singular.bind_positions


def test_bone_mesh_checks_its_parameters() -> None:
    sk = Skeleton(["root", "upper", "lower"], [-1, 0, 1], [[0, 1, 0], [0, 0.5, 0], [0, 0.4, 0]])
    for kwargs, message in (({"radius": 0.0}, "radius must be a finite number > 0"),
                            ({"radius": -0.1}, "radius must be a finite number > 0"),
                            ({"radius": np.nan}, "radius must be a finite number > 0"),
                            ({"radius": "0.1"}, "radius must be a number"),
                            ({"segments": 2}, "segments must be an integer >= 3"),
                            ({"segments": 8.0}, "segments must be an integer >= 3"),
                            ({"rings": 0}, "rings must be an integer >= 1")):
        with pytest.raises(kinema.SolverInputError, match=message):
            bone_mesh(sk, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(kinema.SolverInputError, match="skeleton must be a kinema.Skeleton"):
        bone_mesh(None)  # type: ignore[arg-type]
    mesh = bone_mesh(sk, radius=np.float32(0.05), segments=np.int64(3), rings=1)  # numpy numbers are numbers
    assert np.all(np.isfinite(mesh.positions)) and mesh.n_vertices == 2 * (2 + 2 * 3)
