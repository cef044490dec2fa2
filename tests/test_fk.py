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

import kinema
from kinema import Pose, ShapeError, Skeleton, SolverInputError, forward_kinematics, world_to_local
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
    "huge": np.concatenate([a.ravel() for a in (R.normalize(q * 1e300), R.as_euler(q * 2.0**600, "zxz"),
                                                R.from_rotvec([0.0, 3e200, -4e200]),
                                                R.from_two_vectors([1e300, 0, 0], [0, 1e300, 1]))]).tolist(),
    "fk_huge": kinema.forward_kinematics(sk, kinema.Pose(pose.translations, pose.rotations * 1e300,
                                                         pose.scales)).positions.tolist(),
    "euler_lock": kinema.limits.EulerRange("XYZ", (-0.3, -3.1, -0.3), (0.3, 3.1, 0.3)).clamp(R.from_euler(
        "XYZ", [[0.25, 1.5707963267948966, 0.25], [0.5, 1.5707962, 0.4], [0.1, -1.5707964, 0.9]])).tolist(),
    "jit_disabled": __import__("numba").config.DISABLE_JIT,
}
try:
    kinema.world_to_local(sk, fk.rotations, fk.positions, np.full((n, 3), 1e-200))
except kinema.SolverInputError as error:
    out["w2l_singular"] = str(error)
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
    for key in ("pos", "mat", "euler", "ftv", "w2l", "huge", "fk_huge", "euler_lock"):
        assert np.allclose(np.array(jit[key]), np.array(py[key]), rtol=0, atol=1e-12), key
    assert jit["w2l_singular"] == py["w2l_singular"] and "has no inverse" in py["w2l_singular"]


# ------------------------------------------------------------------------- exploratory pass
@pytest.mark.parametrize("uniform", [True, False])
def test_local_rotations_of_any_finite_size(uniform: bool, rng: np.random.Generator) -> None:
    """Local rotations with components of 1e300 (their squares overflow): FK made them zero quaternions, so the
    joints below did not turn; world_to_local of such world rotations gave zero local rotations."""
    sk = random_skeleton(rng, 20, uniform=uniform)
    pose = random_pose(rng, sk, (4,), uniform=uniform)
    pose.rotations[:] = R.normalize(pose.rotations)
    sizes = np.where(rng.random((4, 20, 1)) < 0.5, 1e300, 1.0)
    huge = Pose(pose.translations, pose.rotations * sizes, pose.scales)
    for matrices in (False, True):
        want = forward_kinematics(sk, pose, matrices=matrices)
        got = forward_kinematics(sk, huge, matrices=matrices)
        extent = 1.0 + np.abs(want.positions).max()
        np.testing.assert_allclose(got.positions, want.positions, rtol=0, atol=1e-14 * extent)
        assert np.all(R.equal(got.rotations, want.rotations, atol=1e-14))
    fk = forward_kinematics(sk, pose)
    back = world_to_local(sk, fk.rotations * sizes, fk.positions, pose.scales)
    assert np.all(R.equal(back.rotations, pose.rotations, atol=1e-12))


@pytest.mark.parametrize("uniform", [True, False])
def test_world_to_local_refuses_a_world_scale_without_inverse(uniform: bool) -> None:
    """A zero scale, or scales whose product underflows (1e-200 twice), raised a bare ZeroDivisionError from the
    serial kernel and a SystemError from the parallel one."""
    from kinema.fk import FK_PARALLEL_MIN_JOINTS

    sk = kinema.samples.humanoid()
    fk = forward_kinematics(sk, sk.rest_pose())
    for k, joint in ((0.0, "root"), (1e-200, "chest")):
        scales = np.ones((sk.n_joints, 3))
        scales[: sk.index("chest") + 1] = [k, k, k] if uniform else [k, 1.0, 1.0]
        for n in (1, FK_PARALLEL_MIN_JOINTS // sk.n_joints + 1):  # the serial and the parallel driver
            with pytest.raises(SolverInputError, match=f"world scale of joint '{joint}' has no inverse"):
                world_to_local(sk, np.broadcast_to(fk.rotations, (n,) + fk.rotations.shape), fk.positions, scales)
    with pytest.raises(SolverInputError, match="skeleton must be a kinema.Skeleton"):
        world_to_local("humanoid", fk.rotations, fk.positions)  # type: ignore[arg-type]


@given(st.integers(0, 2**32 - 1), st.booleans(), st.floats(-3.0, 3.0), st.floats(-3.0, 3.0))
def test_fk_is_invariant_under_a_moved_rotated_scaled_root(seed: int, uniform: bool, log_k: float,
                                                           log_shift: float) -> None:
    """Rotating the root by q, scaling it uniformly by k (1e-3..1e3) and moving it by a shift (up to 1e3) moves
    every joint rigidly: p' = shift + k q (p - p_root) (+ root's own move), q' = q q_world, to 1e-13 of the
    figure's extent, with uniform and non-uniform scales below the root."""
    rng = np.random.default_rng(seed)
    sk = random_skeleton(rng, 30, uniform=uniform)
    pose = random_pose(rng, sk, (), uniform=uniform)
    pose.scales[0] = 1.3  # the root's own scale is uniform (a non-uniform one would shear, not scale)
    base = forward_kinematics(sk, pose)
    q = R.normalize(rng.normal(size=4))
    k = 10.0**log_k
    shift = rng.normal(size=3) * 10.0**log_shift
    moved = pose.copy()
    moved.rotations[0] = R.multiply(q, pose.rotations[0])
    moved.translations[0] = shift
    moved.scales[0] = pose.scales[0] * k
    out = forward_kinematics(sk, moved)
    expect = shift + k * R.rotate(q, base.positions - base.positions[0])
    extent = np.abs(shift).max() + k * np.abs(base.positions - base.positions[0]).max()
    np.testing.assert_allclose(out.positions, expect, rtol=0, atol=1e-13 * extent)
    assert np.max(R.angle_between(out.rotations, R.multiply(q, base.rotations))) <= 1e-13


def test_batch_of_mixed_sizes_equals_single_calls_bit_for_bit(rng: np.random.Generator) -> None:
    sk = random_skeleton(rng, 12, uniform=False)
    pose = random_pose(rng, sk, (6,), uniform=False)
    pose.rotations[::2, 3] *= 1e300
    pose.rotations[1::3, 7] *= 1e-300  # near zero: the identity, as documented
    for matrices in (False, True):
        whole = forward_kinematics(sk, pose, matrices=matrices)
        for i in range(6):
            one = forward_kinematics(sk, pose[i], matrices=matrices)
            np.testing.assert_array_equal(one.positions, whole.positions[i])
            np.testing.assert_array_equal(one.rotations, whole.rotations[i])
