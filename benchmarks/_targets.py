"""Shared benchmark inputs for the chain solvers (CCD, FABRIK): a 10-bone chain and reachable targets.

``chain_rig()`` builds a plain chain (joint k the parent of k+1) with bent,
uneven bones; ``reachable_targets()`` places targets where the chain's end
actually is under random joint rotations, so every target is reachable.
Both are deterministic for a given seed.
"""

from __future__ import annotations

import numpy as np

import kinema

__all__ = ["chain_rig", "reachable_targets", "N_BONES", "N_TARGETS"]

N_BONES = 10
N_TARGETS = 1000


def chain_rig(n_bones: int = N_BONES, seed: int = 7) -> tuple[kinema.Skeleton, tuple[str, str]]:
    """A chain of ``n_bones`` bones (``n_bones + 1`` joints ``j0 .. jN``), and its ``(start, end)``.

    Bones are 0.6 to 1.4 long, mostly along +y with a random lean; rest
    rotations are small random turns (so the rest pose is a gentle curve).
    """
    rng = np.random.default_rng(seed)
    n = n_bones + 1
    t = np.zeros((n, 3))
    t[1:] = rng.normal(size=(n_bones, 3)) * 0.15 + np.array([0.0, 1.0, 0.0])
    t[1:] *= rng.uniform(0.6, 1.4, size=(n_bones, 1)) / np.linalg.norm(t[1:], axis=1, keepdims=True)
    axes = rng.normal(size=(n, 3))
    rot = kinema.rotation.from_axis_angle(axes, rng.uniform(0.0, 0.15, size=n))
    names = [f"j{k}" for k in range(n)]
    sk = kinema.Skeleton(names, [-1] + list(range(n - 1)), t, rot)
    return sk, (names[0], names[-1])


def reachable_targets(skeleton: kinema.Skeleton, chain: tuple[str, str], n: int = N_TARGETS,
                      seed: int = 11, spread: float = 0.6) -> np.ndarray:
    """``(n, 3)`` world end positions of the chain under random local turns (radians ~ ``spread``)."""
    rng = np.random.default_rng(seed)
    pose = skeleton.rest_pose((n,))
    joints = skeleton.chain(*chain)
    turns = kinema.rotation.from_rotvec(rng.normal(size=(n, joints.size, 3)) * spread)
    pose.rotations[:, joints] = kinema.rotation.multiply(pose.rotations[:, joints], turns)
    fk = kinema.forward_kinematics(skeleton, pose)
    return np.ascontiguousarray(fk.positions[:, joints[-1]])
