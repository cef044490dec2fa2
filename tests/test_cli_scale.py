"""``convert --scale`` scales a glTF file's skinned mesh with its skeleton and animation.

The mesh a glTF file brought (vertex positions and inverse bind matrices)
was written at its original size while the skeleton and the clip were
scaled, so the character came out distorted: RiggedSimple's rest-pose
skinned extent went from [2, 9.15, 2] to [2, 5.00, 2] under ``--scale 0.01``
instead of [0.02, 0.0915, 0.02].  The property checked: every skinned vertex
of the output, at rest and in every animation frame, is ``scale`` times the
input's, for ``convert`` and ``batch convert`` alike.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from _cli import run
from kinema import Pose, rotation
from kinema.cli._files import scaled, scaled_mesh
from kinema.io import load_gltf
from kinema.pose import Clip

DATA = Path(__file__).parent / "data" / "gltf"

#: Every skinned glTF fixture (each has a skin and an animation).
SKINNED = ("RiggedSimple.gltf", "RiggedFigure.gltf", "RiggedSimple-2e6fed56.gltf")

#: glTF stores positions, matrices and keys as float32 (relative rounding ~6e-8); the skinned positions of a
#: re-written file agree with the scaled input's to ~5e-8 of the mesh's extent.  Allowed: 1e-6 of the extent.
FLOAT32_RTOL = 1e-6


def _skinned(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A glTF file's skinned positions at its rest pose ``(V, 3)`` and in every frame of its first animation
    ``(F, V, 3)``, and the animation's key times."""
    asset = load_gltf(path)
    assert asset.mesh is not None, path
    clip = next(iter(asset.clips.values()))
    return (asset.mesh.skinned_positions(asset.skeleton, asset.skeleton.rest_pose()),
            asset.mesh.skinned_positions(asset.skeleton, clip.pose), np.asarray(clip.times))


def _assert_scaled(out: Path, src: Path, factor: float) -> None:
    """``out``'s skinned positions (rest pose and every animation frame) are ``factor`` times ``src``'s."""
    rest0, frames0, times0 = _skinned(src)
    rest1, frames1, times1 = _skinned(out)
    np.testing.assert_allclose(times1, times0, rtol=1e-6, atol=0)  # the same frames
    for got, want in ((rest1, factor * rest0), (frames1, factor * frames0)):
        assert got.shape == want.shape
        tol = FLOAT32_RTOL * float(np.max(np.ptp(want.reshape(-1, 3), axis=0)))
        np.testing.assert_allclose(got, want, rtol=0, atol=tol)


@pytest.mark.parametrize("name", SKINNED)
@pytest.mark.parametrize("factor", ["0.01", "1", "100"])
def test_convert_scale_scales_the_skinned_mesh(capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str,
                                               factor: str) -> None:
    """The skinned mesh is scaled with the skeleton (it kept its size: RiggedSimple's rest extent
    [2, 9.15, 2] became [2, 5.00, 2] under --scale 0.01); --scale 1 leaves it as it is."""
    out = tmp_path / "scaled.glb"
    code, _, err = run(capsys, "convert", DATA / name, out, "--scale", factor)
    assert code == 0, err
    _assert_scaled(out, DATA / name, float(factor))
    src, got = load_gltf(DATA / name).mesh, load_gltf(out).mesh
    assert src is not None and got is not None
    assert src.normals is not None and got.normals is not None
    np.testing.assert_allclose(got.normals, src.normals, rtol=0, atol=1e-6)  # directions: not scaled


def test_rigged_simple_rest_extent_after_scale(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The reported numbers: rest-pose skinned extent [2, 9.15, 2] becomes [0.02, 0.0915, 0.02]."""
    out = tmp_path / "s.glb"
    code, _, err = run(capsys, "convert", DATA / "RiggedSimple.gltf", out, "--scale", "0.01")
    assert code == 0, err
    rest, _, _ = _skinned(out)
    np.testing.assert_allclose(np.ptp(rest, axis=0), [0.02, 0.0915015, 0.02], rtol=1e-5)


def test_batch_convert_scales_the_skinned_mesh_as_convert_does(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    """``batch convert --scale`` writes the same bytes as ``convert --scale`` (the same scaled mesh)."""
    folder = tmp_path / "in"
    folder.mkdir()
    for name in SKINNED:
        shutil.copyfile(DATA / name, folder / name)
    code, out, err = run(capsys, "batch", "convert", folder, "-o", tmp_path / "out", "--to", "glb", "--scale", "0.01",
                         "--workers", "1")
    assert code == 0, err
    assert f"{len(SKINNED)} ok, 0 missed, 0 failed, 0 skipped" in out
    for name in SKINNED:
        stem = Path(name).stem
        batch_out = tmp_path / "out" / f"{stem}.glb"
        _assert_scaled(batch_out, DATA / name, 0.01)
        single = tmp_path / f"{stem}.glb"
        code, _, err = run(capsys, "convert", DATA / name, single, "--scale", "0.01")
        assert code == 0, err
        assert batch_out.read_bytes() == single.read_bytes()


def test_scaled_mesh_scales_every_skinned_vertex_in_float64() -> None:
    """The formula itself, without float32 storage: positions times s, inverse bind translations times s
    (linear parts unchanged) make every skinned vertex s times the original in any pose, here random
    rotations, translations and non-uniform scales on RiggedFigure's 19 joints and non-trivial bind matrices."""
    asset = load_gltf(DATA / "RiggedFigure.gltf")
    mesh, sk = asset.mesh, asset.skeleton
    assert mesh is not None
    rng = np.random.default_rng(7)
    rest = sk.rest_pose()
    n = sk.n_joints
    rots = rotation.normalize(rng.normal(size=(4, n, 4)))
    pose = Pose(rest.translations + rng.normal(scale=0.1, size=(4, n, 3)), rots,
                rng.uniform(0.5, 1.5, size=(4, n, 3)))
    clip = Clip(pose, 30.0)
    for factor in (0.01, 1.0, 37.5):
        sk1, clip1 = scaled(sk, clip, factor)
        mesh1 = scaled_mesh(mesh, factor)
        np.testing.assert_array_equal(mesh1.normals, mesh.normals)
        np.testing.assert_array_equal(mesh1.inverse_bind_matrices[:, :3, :3], mesh.inverse_bind_matrices[:, :3, :3])
        for p0, p1 in ((rest, sk1.rest_pose()), (pose, clip1.pose)):
            want = factor * mesh.skinned_positions(sk, p0)
            np.testing.assert_allclose(mesh1.skinned_positions(sk1, p1), want, rtol=0,
                                       atol=1e-12 * float(np.max(np.abs(want))))
    assert scaled_mesh(None, 0.01) is None


def test_scaled_keeps_the_source_format_and_the_bvh_layout() -> None:
    """``meta["format"]`` tells ``save_bvh`` a skeleton came from float32 glTF data (its rounding is no motion);
    ``scaled`` kept only the ``bvh_*`` keys, so a scaled glTF lost it and float32 noise could widen the layout."""
    asset = load_gltf(DATA / "RiggedFigure.gltf")
    skeleton, clip = asset.skeleton, next(iter(asset.clips.values()))
    assert skeleton.meta["format"] == "gltf"
    sk, _ = scaled(skeleton, clip, 0.01)
    assert sk.meta["format"] == "gltf"
    assert {k: v for k, v in sk.meta.items() if k.startswith("bvh_")} == \
        {k: v for k, v in skeleton.meta.items() if k.startswith("bvh_")}
