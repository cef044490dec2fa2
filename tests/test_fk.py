"""Forward kinematics against an independent 4x4-matrix implementation, and its inverse."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation as SciRot

from kinema import Pose, ShapeError, Skeleton, forward_kinematics, world_to_local
from kinema import rotation as R


def random_skeleton(rng: np.random.Generator, n: int, *, uniform: bool = True) -> Skeleton:
    parents = np.array([-1] + [int(rng.integers(0, j)) for j in range(1, n)])
    t = rng.normal(size=(n, 3))
    r = rng.normal(size=(n, 4))
    if uniform:
        s = np.repeat(rng.uniform(0.5, 2.0, size=(n, 1)), 3, axis=1)
    else:
        s = rng.uniform(0.5, 2.0, size=(n, 3))
    return Skeleton([f"j{i}" for i in range(n)], parents, t, r, s)


def random_pose(rng: np.random.Generator, sk: Skeleton, batch: tuple[int, ...], *, uniform: bool = True) -> Pose:
    n = sk.n_joints
    t = rng.normal(size=batch + (n, 3))
    r = rng.normal(size=batch + (n, 4))
    if uniform:
        s = np.repeat(rng.uniform(0.5, 2.0, size=batch + (n, 1)), 3, axis=-1)
    else:
        s = rng.uniform(0.5, 2.0, size=batch + (n, 3))
    return Pose(t, r, s)


def reference_fk(parents: np.ndarray, t: np.ndarray, r: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Straightforward world matrices: M_j = M_parent @ T(t) @ R(q) @ S(s), one pose."""
    n = len(parents)
    out = np.zeros((n, 4, 4))
    for j in range(n):
        local = np.eye(4)
        local[:3, :3] = SciRot.from_quat(r[j]).as_matrix() @ np.diag(s[j])
        local[:3, 3] = t[j]
        out[j] = local if parents[j] < 0 else out[parents[j]] @ local
    return out


@given(st.integers(0, 2**32 - 1), st.booleans())
def test_fk_matches_reference_on_random_60_joint_trees(seed: int, uniform: bool) -> None:
    rng = np.random.default_rng(seed)
    sk = random_skeleton(rng, 60, uniform=uniform)
    pose = random_pose(rng, sk, (), uniform=uniform)
    fk = forward_kinematics(sk, pose, matrices=True)
    ref = reference_fk(sk.parents, pose.translations, pose.rotations, pose.scales)
    scale = 1.0 + np.abs(ref[:, :3, 3]).max()
    assert np.allclose(fk.positions, ref[:, :3, 3], rtol=0, atol=1e-12 * scale)
    assert fk.matrices is not None
    assert np.allclose(fk.matrices, ref, rtol=0, atol=1e-12 * scale)
    if uniform:
        assert fk.scales is not None
        # World rotation is the matrix with the uniform world scale divided out.
        rot_ref = ref[:, :3, :3] / fk.scales[:, None, None]
        assert np.allclose(R.as_matrix(fk.rotations), rot_ref, atol=1e-12)
    else:
        assert fk.scales is None


def test_batch_equals_loop_of_singles(rng: np.random.Generator) -> None:
    sk = random_skeleton(rng, 25)
    pose = random_pose(rng, sk, (3, 4))
    fk = forward_kinematics(sk, pose, matrices=True)
    assert fk.positions.shape == (3, 4, 25, 3) and fk.rotations.shape == (3, 4, 25, 4)
    assert fk.matrices is not None and fk.matrices.shape == (3, 4, 25, 4, 4)
    for a in range(3):
        for b in range(4):
            single = forward_kinematics(sk, pose[a, b], matrices=True)
            assert single.positions.shape == (25, 3)
            assert np.array_equal(single.positions, fk.positions[a, b])
            assert np.array_equal(single.rotations, fk.rotations[a, b])
            assert single.matrices is not None and np.array_equal(single.matrices, fk.matrices[a, b])


def test_shared_arrays_broadcast_without_changing_results(rng: np.random.Generator) -> None:
    sk = random_skeleton(rng, 12)
    rots = rng.normal(size=(7, 12, 4))
    shared = Pose(sk.translations, rots, sk.scales)  # translations and scales shared by all frames
    full = shared.broadcast()
    a = forward_kinematics(sk, shared)
    b = forward_kinematics(sk, full)
    assert np.array_equal(a.positions, b.positions) and np.array_equal(a.rotations, b.rotations)


@given(st.integers(0, 2**32 - 1), st.booleans())
def test_world_to_local_inverts_fk(seed: int, uniform: bool) -> None:
    rng = np.random.default_rng(seed)
    sk = random_skeleton(rng, 40, uniform=uniform)
    pose = random_pose(rng, sk, (3,), uniform=uniform)
    fk = forward_kinematics(sk, pose)
    back = world_to_local(sk, fk.rotations, fk.positions, pose.scales)
    assert np.allclose(back.translations, pose.translations, rtol=0, atol=1e-12 * (1 + np.abs(fk.positions).max()))
    assert np.all(R.equal(back.rotations, pose.rotations, atol=1e-12))
    assert np.array_equal(back.scales, pose.scales)


def test_world_to_local_default_scales_and_single(rng: np.random.Generator) -> None:
    sk = random_skeleton(rng, 10)
    pose = Pose(rng.normal(size=(10, 3)), rng.normal(size=(10, 4)), sk.scales)
    fk = forward_kinematics(sk, pose)
    back = world_to_local(sk, fk.rotations, fk.positions)
    assert back.translations.shape == (10, 3)
    assert np.allclose(back.translations, pose.translations, atol=1e-12 * (1 + np.abs(fk.positions).max()))


def test_rotated_translated_scaled_root_moves_everything_rigidly(rng: np.random.Generator) -> None:
    sk = random_skeleton(rng, 15)
    pose = random_pose(rng, sk, ())
    base = forward_kinematics(sk, pose)
    q = R.normalize(rng.normal(size=4))
    shift = rng.normal(size=3)
    moved = pose.copy()
    moved.rotations[0] = R.multiply(q, pose.rotations[0])
    moved.translations[0] = R.rotate(q, pose.translations[0]) * 1.7 + shift
    moved.scales[0] = pose.scales[0] * 1.7
    out = forward_kinematics(sk, moved)
    expect = R.rotate(q, base.positions - base.positions[0]) * 1.7 + moved.translations[0]
    assert np.allclose(out.positions, expect, atol=1e-11)


def test_fk_shape_errors(rng: np.random.Generator) -> None:
    sk = random_skeleton(rng, 5)
    other = random_skeleton(rng, 6)
    with pytest.raises(ShapeError, match="skeleton of 5 joints"):
        forward_kinematics(sk, other.rest_pose())
    with pytest.raises(ShapeError, match=r"world_positions: expected shape \(\.\.\., 5, 3\)"):
        world_to_local(sk, np.zeros((5, 4)), np.zeros((4, 3)))


def test_no_nan_for_zero_quaternion_in_pose(rng: np.random.Generator) -> None:
    sk = random_skeleton(rng, 4)
    pose = sk.rest_pose()
    pose.rotations[2] = 0.0  # treated as identity, never NaN
    fk = forward_kinematics(sk, pose)
    assert np.all(np.isfinite(fk.positions)) and np.all(np.isfinite(fk.rotations))


_NOJIT_SCRIPT = r"""
import json, sys
import numpy as np
import kinema
from kinema import rotation as R
rng = np.random.default_rng(7)
n = 9
sk = kinema.Skeleton([f"j{i}" for i in range(n)], [-1] + [int(rng.integers(0, j)) for j in range(1, n)],
                     rng.normal(size=(n, 3)), rng.normal(size=(n, 4)), rng.uniform(0.5, 2, size=(n, 3)))
pose = kinema.Pose(rng.normal(size=(2, n, 3)), rng.normal(size=(2, n, 4)), rng.uniform(0.5, 2, size=(2, n, 3)))
fk = kinema.forward_kinematics(sk, pose, matrices=True)
q = rng.normal(size=(5, 4))
out = {
    "pos": fk.positions.tolist(), "mat": fk.matrices.tolist(),
    "euler": R.as_euler(q, "ZXY").tolist(),
    "ftv": R.from_two_vectors(rng.normal(size=(5, 3)), rng.normal(size=(5, 3))).tolist(),
    "w2l": kinema.world_to_local(sk, fk.rotations, fk.positions, pose.scales).translations.tolist(),
    "jit_disabled": __import__("numba").config.DISABLE_JIT,
}
json.dump(out, sys.stdout)
"""


def _run(env_extra: dict[str, str]) -> dict:
    env = dict(os.environ)
    env.update(env_extra)
    res = subprocess.run([sys.executable, "-c", _NOJIT_SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_same_code_runs_without_jit() -> None:
    """NUMBA_DISABLE_JIT=1 runs the very same kernels as Python; results agree with the compiled ones."""
    jit = _run({"NUMBA_DISABLE_JIT": "0"})
    py = _run({"NUMBA_DISABLE_JIT": "1"})
    assert jit["jit_disabled"] == 0 and py["jit_disabled"] == 1
    for key in ("pos", "mat", "euler", "ftv", "w2l"):
        assert np.allclose(np.array(jit[key]), np.array(py[key]), rtol=0, atol=1e-12), key
