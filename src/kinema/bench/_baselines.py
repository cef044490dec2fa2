"""Vectorised NumPy baselines for the closed forms and FK (the suite's "numpy" peer).

Each does the same maths as kinema's kernel, vectorised over the batch with NumPy (a Python loop
over joints only), so a row's ``ratio_vs_numpy`` is what the compiled kernel buys over plain NumPy.
"""

from __future__ import annotations

import numpy as np

__all__ = ["numpy_fk", "numpy_two_bone", "MARGIN_FRACTION"]

#: The two-bone reach margin, as a fraction of the shorter bone (the kernel's).
MARGIN_FRACTION = 1e-4


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


def _qconj(q: np.ndarray) -> np.ndarray:
    return q * np.array([-1.0, -1.0, -1.0, 1.0])


def _qnorm(q: np.ndarray) -> np.ndarray:
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


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
