"""glTF node transforms and the node hierarchy: local TRS of a node (matrices decomposed),
parents checked to form a tree, joint names, and folding ancestor similarities into joints.

Conventions (glTF 2.0 spec): right-handed, Y up, metres; column vectors;
node transform ``T R S``; quaternions xyzw (same as kinema).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from ... import rotation
from ..._types import FloatArray
from ...skeleton import ZERO_QUAT_EPS
from .reader import CheckedDoc

__all__ = ["decompose", "trs_matrix", "node_local", "node_parents", "is_similarity", "unique_names", "fold",
           "fold_hierarchy", "FoldedHierarchy", "MATRIX_SHEAR_TOL", "SIMILARITY_RTOL"]

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
    q = rotation.from_matrix(rot)  # its nearest rotation (float32 round-off removed)
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
    # A cycle never reaches a root.  Each node is walked once (linear in the node count, so a deep
    # chain cannot make this quadratic): a walk stops at a node an earlier walk showed reaches a root,
    # and meeting a node of its own walk again is a cycle.
    walk_of = [-1] * len(nodes)  # the walk that visited each node (-1: not yet)
    for n in range(len(nodes)):
        p = n
        while p != -1 and walk_of[p] == -1:
            walk_of[p] = n
            p = parent[p]
        if p != -1 and walk_of[p] == n:
            r.fail(f"nodes[{p}]", "is part of a cycle in the node hierarchy")
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


@dataclass(frozen=True)
class FoldedHierarchy:
    """The skeleton's nodes and what is folded into them (see :func:`fold_hierarchy`).

    * ``members``: node index of each skeleton joint, in member order (the skin's joints, then the
      non-joint nodes that had to become joints, by node index).
    * ``parents``: member index of each member's parent (-1 for roots).
    * ``prefix``: ``(t (M, 3), q (M, 4), s (M,))`` the similarity of the non-member ancestors between
      each member and its parent member (identity when none), ``s`` uniform.
    * ``rest``: ``(t (M, 3), q (M, 4), s (M, 3))`` each member's own local TRS.
    """

    members: list[int]
    parents: list[int]
    prefix: tuple[FloatArray, FloatArray, FloatArray]
    rest: tuple[FloatArray, FloatArray, FloatArray]


def fold_hierarchy(r: CheckedDoc, parent: list[int], joints: list[int]) -> FoldedHierarchy:
    """The skeleton members of ``joints`` and the ancestor transforms folded into them.

    Members are the joints plus every non-joint node of a *segment* (the
    non-member ancestors between a member and the next member above it)
    whose composed transform is not a similarity: such a segment cannot be
    folded into one joint's TRS, so its nodes become joints.  Segments are
    checked in member order and, after each addition, again from the first
    member whose segment the addition changed (the same members as checking
    everything again after each addition, which a crafted file could make
    quadratic).  Each segment's composed matrix is built once per node and
    reused by every member below it, so a long chain above many joints costs
    linear time.
    """
    n_nodes = len(parent)
    children: list[list[int]] = [[] for _ in range(n_nodes)]
    for n, p in enumerate(parent):
        if p != -1:
            children[p].append(n)
    local_cache: dict[int, tuple[FloatArray, FloatArray, FloatArray]] = {}

    def local(n: int) -> tuple[FloatArray, FloatArray, FloatArray]:
        if n not in local_cache:
            local_cache[n] = node_local(r, n)
        return local_cache[n]

    member_set = set(joints)
    # Non-member node -> (matrix from it up to just below the next member, that member or -1).
    above: dict[int, tuple[FloatArray, int]] = {}

    def up(x: int) -> tuple[FloatArray, int]:
        """``above[x]`` for a non-member ``x``, filling in its non-member ancestors on the way."""
        chain = []
        while x not in above:
            chain.append(x)
            p = parent[x]
            if p == -1 or p in member_set:
                break
            x = p
        for y in reversed(chain):  # top first
            p = parent[y]
            if p == -1 or p in member_set:
                above[y] = (trs_matrix(*local(y)), p)
            else:
                m, top = above[p]
                above[y] = (m @ trs_matrix(*local(y)), top)  # M = L(top) ... L(y)
        return above[chain[0]] if chain else above[x]

    def segment(n: int) -> list[int]:
        """Non-member ancestors of member ``n`` up to the next member (nearest first)."""
        out = []
        p = parent[n]
        while p != -1 and p not in member_set:
            out.append(p)
            p = parent[p]
        return out

    order = list(joints)  # member order: checking order
    index = {n: k for k, n in enumerate(order)}
    pending = list(range(len(order)))  # members (by order index) whose segment is not known to fold
    heapq.heapify(pending)
    queued = set(pending)
    while pending:
        k = heapq.heappop(pending)
        queued.discard(k)
        n = order[k]
        p = parent[n]
        if p == -1 or p in member_set or is_similarity(up(p)[0]):
            continue
        seg = segment(n)
        # Every member below the segment's top through non-members has a segment this changes:
        # drop their cached matrices and check them again.
        stack = [seg[-1]]
        while stack:
            x = stack.pop()
            above.pop(x, None)
            for c in children[x]:
                if c in member_set:
                    if index[c] not in queued:
                        heapq.heappush(pending, index[c])
                        queued.add(index[c])
                else:
                    stack.append(c)
        for x in seg:
            member_set.add(x)
            index[x] = len(order)
            order.append(x)
            heapq.heappush(pending, index[x])
            queued.add(index[x])
    members = order[: len(joints)] + sorted(order[len(joints):])  # added nodes by node index
    pos = {n: k for k, n in enumerate(members)}
    mparents = []
    nm = len(members)
    pre_t = np.zeros((nm, 3))
    pre_q = np.tile([0.0, 0.0, 0.0, 1.0], (nm, 1))
    pre_s = np.ones(nm)
    for k, n in enumerate(members):
        p = parent[n]
        if p == -1 or p in member_set:
            mparents.append(pos[p] if p != -1 else -1)
            continue
        m, top = up(p)
        mparents.append(pos[top] if top != -1 else -1)
        pt, pq, ps = decompose(r, m, f"nodes[{p}] (and its ancestors)")
        pre_t[k], pre_q[k], pre_s[k] = pt, pq, float(np.mean(ps))
    rest_t = np.array([local(n)[0] for n in members])
    rest_q = np.array([local(n)[1] for n in members])
    rest_s = np.array([local(n)[2] for n in members])
    return FoldedHierarchy(members, mparents, (pre_t, pre_q, pre_s), (rest_t, rest_q, rest_s))
