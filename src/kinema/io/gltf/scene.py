"""glTF node transforms and the node hierarchy: local TRS of a node (matrices decomposed),
parents checked to form a tree, joint names, and folding ancestor similarities into joints.

Conventions (glTF 2.0 spec): right-handed, Y up, metres; column vectors;
node transform ``T R S``; quaternions xyzw (same as kinema).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ... import rotation
from ...skeleton import ZERO_QUAT_EPS
from .reader import CheckedDoc

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

__all__ = ["decompose", "trs_matrix", "node_local", "node_parents", "is_similarity", "unique_names", "fold",
           "MATRIX_SHEAR_TOL", "SIMILARITY_RTOL"]

#: A node ``matrix`` counts as T*R*S when its rotation part, after dividing out
#: the column norms, is orthonormal to this (max |R^T R - I|).  Files store
#: matrices in float32-derived decimals (~1e-7); real shear is far larger.
MATRIX_SHEAR_TOL = 1e-4

#: Ancestor transforms folded into a joint must be similarities (rotation,
#: uniform scale, translation); scale components within this relative
#: tolerance count as uniform (float32 files carry scales like 1.0000001).
SIMILARITY_RTOL = 1e-6


def decompose(r: CheckedDoc, m: FloatArray, where: str) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(t, q, s)`` with ``m == T(t) R(q) S(s)``; FileFormatError for shear, mirroring or zero scale."""
    if not np.all(np.isfinite(m)) or not np.all(np.isfinite(np.linalg.norm(m[:3, :3], axis=0))):
        r.fail(where, "has values too large to compose")
    if not np.allclose(m[3], (0.0, 0.0, 0.0, 1.0), atol=MATRIX_SHEAR_TOL):
        r.fail(where, f"is not affine (last row {m[3].tolist()})")
    lin = m[:3, :3]
    s = np.linalg.norm(lin, axis=0)
    if np.any(s <= 0.0):
        r.fail(where, "has a zero scale; kinema skeletons need positive scales")
    if np.linalg.det(lin) < 0.0:
        r.fail(where, "mirrors (negative determinant); kinema skeletons need positive scales")
    rot = lin / s
    if np.max(np.abs(rot.T @ rot - np.eye(3))) > MATRIX_SHEAR_TOL:
        r.fail(where, "has shear and cannot be decomposed into translation, rotation and scale")
    u, _, vt = np.linalg.svd(rot)  # nearest exact rotation (removes float32 round-off)
    q = rotation.from_matrix(u @ vt)
    return m[:3, 3].copy(), q, s


def trs_matrix(t: FloatArray, q: FloatArray, s: FloatArray) -> FloatArray:
    m = np.eye(4)
    m[:3, :3] = rotation.as_matrix(q) * s
    m[:3, 3] = t
    return m


def node_local(r: CheckedDoc, n: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Local ``(t, q, s)`` of node ``n`` from its matrix or TRS."""
    w = f"nodes[{n}]"
    node = r.item("nodes", n)
    if "matrix" in node:
        if any(k in node for k in ("translation", "rotation", "scale")):
            r.fail(w, "has both matrix and translation/rotation/scale")
        m = r.numbers(node, "matrix", w, 16, ()).reshape(4, 4).T  # column-major in the file
        return decompose(r, m, f"{w}.matrix")
    t = r.numbers(node, "translation", w, 3, (0.0, 0.0, 0.0))
    q = r.numbers(node, "rotation", w, 4, (0.0, 0.0, 0.0, 1.0))
    s = r.numbers(node, "scale", w, 3, (1.0, 1.0, 1.0))
    big = float(np.max(np.abs(q)))
    if big < ZERO_QUAT_EPS:
        r.fail(f"{w}.rotation", "is a zero quaternion")
    q = q / big  # divide by the largest component first so huge values cannot overflow the norm
    if np.any(s <= 0.0):
        r.fail(f"{w}.scale", f"is {s.tolist()}; kinema skeletons need positive scales")
    return t, q / np.linalg.norm(q), s


def node_parents(r: CheckedDoc) -> list[int]:
    """Parent node of every node (-1 for roots), with the hierarchy checked."""
    nodes = r.top("nodes")
    parent = [-1] * len(nodes)
    for n in range(len(nodes)):
        w = f"nodes[{n}]"
        node = r.item("nodes", n)
        for k, c in enumerate(r.array(node, "children", w, required=False)):
            c = r.ref_value(c, f"{w}.children[{k}]", "nodes")
            if c == n or parent[c] != -1:
                other = n if c == n else parent[c]
                r.fail(f"{w}.children[{k}]", f"node {c} already has parent {other} (nodes form a tree)")
            parent[c] = n
        r.ref(node, "mesh", w, "meshes", required=False)
        r.ref(node, "skin", w, "skins", required=False)
        r.string(node, "name", w)
    for n in range(len(nodes)):  # a cycle never reaches a root
        p, steps = parent[n], 0
        while p != -1:
            steps += 1
            if steps > len(nodes):
                r.fail(f"nodes[{n}]", "is part of a cycle in the node hierarchy")
            p = parent[p]
    return parent


def is_similarity(m: FloatArray) -> bool:
    lin = m[:3, :3]
    s = np.linalg.norm(lin, axis=0)
    if np.any(s <= 0.0) or np.linalg.det(lin) < 0.0:
        return False
    if np.max(np.abs(s - s.mean())) > SIMILARITY_RTOL * s.mean():
        return False
    rot = lin / s
    return bool(np.max(np.abs(rot.T @ rot - np.eye(3))) <= MATRIX_SHEAR_TOL)


def unique_names(r: CheckedDoc, members: list[int]) -> list[str]:
    """Node names; ``node_<index>`` for unnamed nodes; ``<name>_node_<index>`` for a name already taken
    (named nodes claim their names first, in node order)."""
    used: set[str] = set()
    out: dict[int, str] = {}
    given = {n: r.item("nodes", n).get("name") for n in members}
    # Named nodes first, lowest node index first, so a real name always wins over a generated one.
    for n in sorted(members, key=lambda n: (not given[n], n)):
        name = given[n]
        cand: str = name if isinstance(name, str) and name else f"node_{n}"
        if cand in used:
            base = f"{cand}_node_{n}"
            cand, k = base, 1
            while cand in used:
                k += 1
                cand = f"{base}_{k}"
        used.add(cand)
        out[n] = cand
    return [out[n] for n in members]


def fold(prefix_t: FloatArray, prefix_q: FloatArray, prefix_s: FloatArray,
          t: FloatArray, q: FloatArray, s: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Compose similarity prefixes ``P_j = (t_p, q_p, s_p)`` (per joint) with local TRS ``(..., J, k)``.

    ``P (T R S) = T(t_p + s_p rotate(q_p, t)) R(q_p q) S(s_p s)``: exact because
    ``s_p`` is uniform.
    """
    t2 = prefix_t + prefix_s[:, None] * rotation.rotate(prefix_q, t)
    q2 = rotation.multiply(prefix_q, q)
    s2 = prefix_s[:, None] * s
    return t2, q2, s2


