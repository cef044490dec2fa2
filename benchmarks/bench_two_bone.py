"""Two-bone IK: 100,000 targets batched, kinema's kernel versus a vectorised NumPy version of the same maths;
and single public calls.

Run: ``pytest benchmarks/bench_two_bone.py --benchmark-only``.  The rig is an
arm of 4 joints (a rotated, translated root, then shoulder, elbow, wrist);
one pose, 100,000 targets spread over and beyond the reach, one pole.  Solves
per second are in each row's ``extra_info``.
"""

from __future__ import annotations

import numpy as np
import pytest

import kinema

N_TARGETS = 100_000
CHAIN = ("shoulder", "elbow", "wrist")
MARGIN_FRACTION = 1e-4


def _rig() -> tuple[kinema.Skeleton, kinema.Pose]:
    rot = kinema.rotation.from_axis_angle([[0.2, 0.9, 0.1], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
                                          [0.7, 0.3, 0.6, 0.1])
    sk = kinema.Skeleton(["root", "shoulder", "elbow", "wrist"], [-1, 0, 1, 2],
                         [[1.0, 0.9, -0.4], [0.2, 1.4, 0.0], [0.0, 1.0, 0.0], [0.0, 0.8, 0.0]], rot)
    return sk, sk.rest_pose()


def _targets(sk: kinema.Skeleton, pose: kinema.Pose) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    shoulder = kinema.forward_kinematics(sk, pose).positions[1]
    targets = shoulder + rng.normal(size=(N_TARGETS, 3)) * 1.1
    return targets, shoulder + np.array([0.0, 0.5, 3.0])


# ---------------------------------------------------------------- baseline
def _qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ax, ay, az, aw = np.moveaxis(a, -1, 0)
    bx, by, bz, bw = np.moveaxis(b, -1, 0)
    return np.stack([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz], axis=-1)


def _qconj(q: np.ndarray) -> np.ndarray:
    return q * np.array([-1.0, -1.0, -1.0, 1.0])


def _qnorm(q: np.ndarray) -> np.ndarray:
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def _qrot(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    u = q[..., :3]
    t = 2.0 * np.cross(u, v)
    return v + q[..., 3:] * t + np.cross(u, t)


def _from_two(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact minimal rotation a -> b (atan2 form, as the kernel); opposite vectors not special-cased."""
    u = a / np.linalg.norm(a, axis=-1, keepdims=True)
    v = b / np.linalg.norm(b, axis=-1, keepdims=True)
    c = np.cross(u, v)
    s = np.linalg.norm(c, axis=-1)
    h = 0.5 * np.arctan2(s, np.sum(u * v, axis=-1))
    k = np.where(s > 1e-15, np.sin(h) / np.where(s > 1e-15, s, 1.0), 0.0)
    return np.concatenate([c * k[:, None], np.cos(h)[:, None]], axis=-1)


def numpy_two_bone(parents: np.ndarray, t: np.ndarray, r: np.ndarray, s: np.ndarray, target: np.ndarray,
                   pole: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Baseline for the 4-joint arm (root, shoulder 1, elbow 2, wrist 3), batched over ``target (N, 3)``.

    Same steps as the kernel: FK, reach clamp, pole plane, law of cosines, world
    correction of the upper bone through the parent inverse, refresh, lower
    bone.  Returns the output rotations ``(N, 4, 4)`` (a copy of ``r`` with the
    shoulder and elbow solved) and the end error ``(N,)``.
    """
    n = target.shape[0]
    out = np.broadcast_to(r, (n,) + r.shape).copy()
    q = _qnorm(r)
    # FK of the (shared) input pose: root, shoulder, elbow, wrist.
    q_root = q[0]
    p_a = t[0] + s[0, 0] * _qrot(q_root, t[1])
    q_a = _qmul(q_root, q[1])
    s_a = s[0, 0] * s[1, 0]
    p_b = p_a + s_a * _qrot(q_a, t[2])
    q_b = _qmul(q_a, q[2])
    s_b = s_a * s[2, 0]
    p_c = p_b + s_b * _qrot(q_b, t[3])
    a = np.linalg.norm(p_b - p_a)
    b = np.linalg.norm(p_c - p_b)
    m = MARGIN_FRACTION * min(a, b)
    dt = target - p_a
    d = np.linalg.norm(dt, axis=-1)
    u = dt / d[:, None]
    dc = np.clip(d, abs(a - b) + m, a + b - m)
    w = pole - p_a
    v = w - u * (u @ w)[:, None]
    v /= np.linalg.norm(v, axis=-1, keepdims=True)
    along = (a * a + dc * dc - b * b) / (2.0 * dc)
    rise = np.sqrt(np.maximum(0.0, a * a - along * along))
    elbow = p_a + u * along[:, None] + v * rise[:, None]
    end = p_a + u * dc[:, None]
    dq = _from_two(np.broadcast_to(p_b - p_a, (n, 3)), elbow - p_a)
    qa_new = _qmul(dq, q_a)
    local_a = _qnorm(_qmul(_qconj(q_root), qa_new))
    qa_new = _qmul(q_root, local_a)
    pb_new = p_a + s_a * _qrot(qa_new, t[2])
    qb_old = _qmul(qa_new, q[2])
    pc_old = pb_new + s_b * _qrot(qb_old, t[3])
    dq = _from_two(pc_old - pb_new, end - pb_new)
    qb_new = _qmul(dq, qb_old)
    local_b = _qnorm(_qmul(_qconj(qa_new), qb_new))
    pc_new = pb_new + s_b * _qrot(_qmul(qa_new, local_b), t[3])
    out[:, 1] = local_a
    out[:, 2] = local_b
    return out, np.linalg.norm(pc_new - target, axis=-1)


@pytest.fixture(scope="module")
def case() -> tuple[kinema.Skeleton, kinema.Pose, np.ndarray, np.ndarray]:
    sk, pose = _rig()
    targets, pole = _targets(sk, pose)
    ours = kinema.solve_two_bone(sk, pose, CHAIN, targets, pole)  # also compiles
    ref, err = numpy_two_bone(sk.parents, pose.translations, pose.rotations, pose.scales, targets, pole)
    # The baseline does the same maths: same rotations, same errors.
    assert np.all(kinema.rotation.equal(ours.pose.rotations, ref, atol=1e-9))
    assert np.allclose(ours.error, err, atol=1e-9)
    kinema.solve_two_bone(sk, pose, CHAIN, targets[0], pole)  # compile the single-pose path
    return sk, pose, targets, pole


def _rate(benchmark, n: int) -> None:  # type: ignore[no-untyped-def]
    benchmark.extra_info["solves_per_s"] = round(n / benchmark.stats.stats.median)


@pytest.mark.benchmark(group="two-bone-100k")
def test_two_bone_batch_kinema(benchmark, case) -> None:  # type: ignore[no-untyped-def]
    """Public API, new output pose per call (allocates and fills 100,000 poses)."""
    sk, pose, targets, pole = case
    benchmark(kinema.solve_two_bone, sk, pose, CHAIN, targets, pole)
    _rate(benchmark, N_TARGETS)


@pytest.mark.benchmark(group="two-bone-100k")
def test_two_bone_batch_kinema_out(benchmark, case) -> None:  # type: ignore[no-untyped-def]
    """Public API writing into a caller-owned output pose (``out=``)."""
    sk, pose, targets, pole = case
    out = sk.rest_pose((N_TARGETS,))
    benchmark(kinema.solve_two_bone, sk, pose, CHAIN, targets, pole, out=out)
    _rate(benchmark, N_TARGETS)


@pytest.mark.benchmark(group="two-bone-100k")
def test_two_bone_batch_numpy_baseline(benchmark, case) -> None:  # type: ignore[no-untyped-def]
    sk, pose, targets, pole = case
    benchmark(numpy_two_bone, sk.parents, pose.translations, pose.rotations, pose.scales, targets, pole)
    _rate(benchmark, N_TARGETS)


@pytest.mark.benchmark(group="two-bone-single")
def test_two_bone_single_call(benchmark, case) -> None:  # type: ignore[no-untyped-def]
    """One pose, one target, one pole, through the public function."""
    sk, pose, targets, pole = case
    target = np.ascontiguousarray(targets[1])
    benchmark(kinema.solve_two_bone, sk, pose, CHAIN, target, pole)


@pytest.mark.benchmark(group="two-bone-single")
def test_two_bone_single_helper(benchmark, case) -> None:  # type: ignore[no-untyped-def]
    """One frame through the stateful TwoBoneIK helper (bend hint, continuity)."""
    sk, pose, targets, pole = case
    ik = kinema.TwoBoneIK(sk, CHAIN, pole=pole)
    target = np.ascontiguousarray(targets[1])
    benchmark(ik.solve, pose, target)


@pytest.mark.benchmark(group="two-bone-single")
def test_two_bone_single_numpy_baseline(benchmark, case) -> None:  # type: ignore[no-untyped-def]
    sk, pose, targets, pole = case
    benchmark(numpy_two_bone, sk.parents, pose.translations, pose.rotations, pose.scales, targets[1:2], pole)
