"""FK of 1000 frames x 60 joints: kinema's kernel versus a vectorised NumPy implementation."""

from __future__ import annotations

import numpy as np
import pytest

import kinema

N_FRAMES = 1000
N_JOINTS = 60


def _setup() -> tuple[kinema.Skeleton, kinema.Pose]:
    rng = np.random.default_rng(0)
    parents = np.array([-1] + [int(rng.integers(max(0, j - 4), j)) for j in range(1, N_JOINTS)])
    sk = kinema.Skeleton([f"j{i}" for i in range(N_JOINTS)], parents, rng.normal(size=(N_JOINTS, 3)))
    q = rng.normal(size=(N_FRAMES, N_JOINTS, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    t = np.broadcast_to(sk.translations, (N_FRAMES, N_JOINTS, 3)).copy()
    return sk, kinema.Pose(t, q, np.ones((N_FRAMES, N_JOINTS, 3)))


def _qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ax, ay, az, aw = np.moveaxis(a, -1, 0)
    bx, by, bz, bw = np.moveaxis(b, -1, 0)
    return np.stack([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz], axis=-1)


def _qrot(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    u = q[..., :3]
    w = q[..., 3:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def numpy_fk(parents: np.ndarray, t: np.ndarray, r: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Baseline: vectorised over frames, a Python loop over joints (uniform scale)."""
    n = t.shape[-2]
    pos = np.empty_like(t)
    rot = np.empty_like(r)
    scl = np.empty(t.shape[:-1])
    r = r / np.linalg.norm(r, axis=-1, keepdims=True)
    for j in range(n):
        p = parents[j]
        if p < 0:
            pos[:, j], rot[:, j], scl[:, j] = t[:, j], r[:, j], s[:, j, 0]
        else:
            pos[:, j] = pos[:, p] + scl[:, p, None] * _qrot(rot[:, p], t[:, j])
            rot[:, j] = _qmul(rot[:, p], r[:, j])
            scl[:, j] = scl[:, p] * s[:, j, 0]
    return pos, rot


@pytest.fixture(scope="module")
def case() -> tuple[kinema.Skeleton, kinema.Pose]:
    sk, pose = _setup()
    ours = kinema.forward_kinematics(sk, pose)  # also compiles
    ref_pos, _ = numpy_fk(sk.parents, pose.translations, pose.rotations, pose.scales)
    assert np.allclose(ours.positions, ref_pos, atol=1e-10)
    return sk, pose


@pytest.mark.benchmark(group="fk-1000x60")
def test_fk_kinema(benchmark, case) -> None:  # type: ignore[no-untyped-def]
    sk, pose = case
    benchmark(kinema.forward_kinematics, sk, pose)


@pytest.mark.benchmark(group="fk-1000x60")
def test_fk_numpy_baseline(benchmark, case) -> None:  # type: ignore[no-untyped-def]
    sk, pose = case
    benchmark(numpy_fk, sk.parents, pose.translations, pose.rotations, pose.scales)
