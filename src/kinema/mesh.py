"""Skinned triangle meshes and linear blend skinning, shared by the glTF io and the viewer.

* :class:`SkinnedMesh`: a triangle mesh bound to a skeleton's joints (what a
  glTF skin holds; ``kinema.io.GltfMesh`` is this class), with its linear
  blend skinning (:meth:`SkinnedMesh.skinned_positions`), its joints' bind
  transforms and dense skin weights (what a renderer such as viser takes).
* :func:`linear_blend_skinning`: the skinning formula on plain arrays.
* :func:`bone_mesh`: a generated skin (capsules along the bones) for
  skeleton-only data such as BVH.

Convention (glTF 2.0): column vectors, ``v_world = sum_k w_k T_world[j_k] @
IBM[j_k] @ v`` with ``IBM`` the inverse bind matrix of each joint.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from . import rotation
from ._solve import check_pose, check_pose_finite
from ._types import FloatArray, IntArray
from ._validate import (
    _numeric_array,
    allocation_refused,
    allocation_text,
    as_float_array,
    check_allocation,
    positive_number,
    require_finite,
    unit_and_length,
)
from .errors import ShapeError, SolverInputError
from .pose import Pose
from .skeleton import Skeleton, check_skeleton

__all__ = ["SkinnedMesh", "linear_blend_skinning", "bone_mesh", "BONE_MIN_LENGTH_RATIO", "WEIGHT_SUM_TOL"]


#: Each vertex's skin weights must sum to 1 within this.  Weights stored as float32 (glTF's) sum to 1 within
#: about 2**-24 per influence (the Khronos glTF-Validator allows 2e-7 per non-zero weight); this is 50 times
#: that for 4 influences, and still far below any intended weight.  A mesh whose rows sum to something else
#: skins every vertex off its bind position even at the bind pose.
WEIGHT_SUM_TOL = 1e-5

#: Bones shorter than this fraction of the skeleton's extent get no capsule in
#: :func:`bone_mesh` (a joint sitting on its parent has no direction).
BONE_MIN_LENGTH_RATIO = 1e-6


def linear_blend_skinning(positions: FloatArray, joints: IntArray, weights: FloatArray,
                          skin_matrices: FloatArray) -> FloatArray:
    """World vertex positions ``(*batch, V, 3)`` by linear blend skinning.

    * ``positions``: ``(V, 3)`` bind-pose vertex positions (mesh space).
    * ``joints`` / ``weights``: ``(V, K)`` joint index and weight of each influence.
    * ``skin_matrices``: ``(*batch, J, 4, 4)`` per joint ``T_world_joint @ IBM``.

    ``v_world = sum_k weights[v, k] * (skin_matrices[joints[v, k]] @ [v, 1])[:3]``.
    Wrong shapes (ragged lists included) raise :class:`~kinema.ShapeError` (expected versus got), as does a
    batch whose work arrays would pass :data:`~kinema._validate.MAX_ALLOCATION_BYTES` (skin fewer frames at a
    time); joint indices outside the skin matrices and NaN or inf :class:`~kinema.SolverInputError`.
    """
    positions, joints, weights, skin_matrices = _skinning_inputs(positions, joints, weights, skin_matrices)
    batch = skin_matrices.shape[:-3]
    n_v, n_k = joints.shape
    # per (*b, V, K, 3, 4), moved (*b, V, K, 3) and the result (*b, V, 3), in float64
    check_allocation(8 * math.prod(batch) * n_v * (n_k * (12 + 3) + 3), "skin_matrices",
                     f"a batch small enough to skin {n_v} vertices of {n_k} influences at once",
                     f"batch {batch}")
    # Every operand C-contiguous: einsum's summation order (so the last bits) follows the memory layout, and a
    # result must not depend on it (a Fortran-ordered or strided input gave other bits).
    per = np.ascontiguousarray(skin_matrices[..., joints, :3, :])  # (*b, V, K, 3, 4)
    hom = np.ones((positions.shape[0], 4))
    hom[:, :3] = positions
    moved = np.einsum("...vkij,vj->...vki", per, hom)
    return np.asarray(np.einsum("...vki,vk->...vi", moved, weights), dtype=np.float64)


def _check_joint_indices(joints: IntArray, n_joints: int, message: str) -> None:
    """:class:`~kinema.SolverInputError` (``message`` and the first bad index) unless every index is in
    ``0 .. n_joints - 1``."""
    bad = joints[(joints < 0) | (joints >= n_joints)]
    if bad.size:
        raise SolverInputError(f"{message} (index {int(bad.flat[0])})")


def _skinning_inputs(positions: Any, joints: Any, weights: Any, skin_matrices: Any
                     ) -> tuple[FloatArray, IntArray, FloatArray, FloatArray]:
    """:func:`linear_blend_skinning`'s inputs checked: shapes, integer joint indices in range, finite numbers."""
    pos = as_float_array(positions, "positions", (3,))
    if pos.ndim != 2:
        raise ShapeError("positions", "(V, 3)", tuple(pos.shape))
    n_v = pos.shape[0]
    j = _numeric_array(joints, "joints", f"({n_v}, K) integer joint indices")  # ShapeError for ragged lists
    if j.dtype.kind not in "iu":
        raise ShapeError("joints", f"({n_v}, K) integer joint indices", f"an array of dtype {j.dtype}")
    if j.ndim != 2 or j.shape[0] != n_v:
        raise ShapeError("joints", f"({n_v}, K) for {n_v} vertices", tuple(j.shape))
    w = as_float_array(weights, "weights", ())
    if w.shape != j.shape:
        raise ShapeError("weights", f"{tuple(j.shape)} as joints", tuple(w.shape))
    skin = as_float_array(skin_matrices, "skin_matrices", (4, 4))
    if skin.ndim < 3:
        raise ShapeError("skin_matrices", "(..., J, 4, 4)", tuple(skin.shape))
    n_j = skin.shape[-3]
    _check_joint_indices(j, n_j, f"joints: an index is out of range for {n_j} skin matrices")
    for what, a in (("positions", pos), ("weights", w), ("skin_matrices", skin)):
        require_finite(a, what)
    # C-contiguous copies of any other layout (see linear_blend_skinning); a C-ordered float64 input is kept.
    return (np.ascontiguousarray(pos), np.ascontiguousarray(j, dtype=np.int64), np.ascontiguousarray(w),
            np.ascontiguousarray(skin))


def _fmt(v: Any) -> str:
    """One array value in a message: integers as they are, floats in 6 significant digits."""
    return f"{v:.6g}" if isinstance(v, (float, np.floating)) else str(v)


def _first(mask: Any) -> tuple[int, ...]:
    """Index of the first True of ``mask``."""
    return tuple(int(i) for i in np.argwhere(mask)[0])


def _require_finite(a: FloatArray, what: str) -> None:
    """:func:`require_finite`, with a fast pass first: the sum of finite numbers is finite unless it overflows,
    so only a sum that is not finite (NaN or inf inside, or an overflow) needs the element-wise look."""
    with np.errstate(over="ignore", invalid="ignore"):
        total = a.sum()
    if not np.isfinite(total):
        require_finite(a, what)


def row_sums(w: FloatArray) -> FloatArray:
    """``w.sum(axis=1)`` of a ``(V, K)`` array, as a matrix-vector product: numpy reduces short rows one by one,
    several times slower on the loader's path (a million vertices of four weights)."""
    return np.asarray(w @ np.ones(w.shape[1]), dtype=np.float64)


def _fits(shape: tuple[int, ...], pattern: tuple[int | None, ...]) -> bool:
    """Whether ``shape`` is ``pattern``, a None in it standing for any size."""
    return len(shape) == len(pattern) and all(p is None or p == n for n, p in zip(shape, pattern, strict=True))


def _index_array(x: Any, what: str, expected: str, pattern: tuple[int | None, ...], n: int, of: str,
                 kind: str) -> IntArray:
    """``x`` as native int64 indices in ``0 .. n - 1``: integer arrays of any width and byte order, or floats
    holding whole numbers.  ShapeError (``expected`` versus got) unless its shape fits ``pattern``;
    SolverInputError naming the first NaN, fractional or out-of-range entry (``of`` says what ``n`` counts)."""
    a = _numeric_array(x, what, expected)
    if not _fits(a.shape, pattern):
        raise ShapeError(what, expected, tuple(a.shape))
    if a.dtype.kind == "f":
        _require_finite(a, what)
        frac = a != np.floor(a)
        if np.any(frac):
            i = _first(frac)
            raise SolverInputError(f"{what}[{', '.join(map(str, i))}] is {_fmt(a[i])}: {kind} indices must be whole "
                                   "numbers")
    # Compared in the array's own type, before any cast: a uint64 or 1e300 must not wrap into range.  Reductions
    # first (no temporary arrays), the first bad entry looked for only when there is one.  Native int64 (what
    # the loader builds) takes one: viewed as uint64 a negative index is 2**63 or more, beyond any count.
    if a.dtype == np.int64 and a.dtype.isnative and a.flags.c_contiguous:
        bad_any = bool(a.size) and int(a.view(np.uint64).max()) >= n
    else:
        bad_any = bool(a.size) and bool(a.min() < 0 or a.max() >= n)
    if bad_any:
        i = _first((a < 0) | (a >= n))
        raise SolverInputError(f"{what}[{', '.join(map(str, i))}] is {_fmt(a[i])}: out of range for {n} {of}")
    if a.dtype != np.int64 or not a.dtype.isnative:
        a = a.astype(np.int64)
    return a


def _float_array(x: Any, what: str, expected: str, pattern: tuple[int | None, ...]) -> FloatArray:
    """``x`` as native float64 (ints, float32 and big-endian read as the numbers they hold) whose shape fits
    ``pattern`` (ShapeError otherwise), finite (SolverInputError naming the first NaN or inf)."""
    a = _numeric_array(x, what, expected)
    if a.dtype != np.float64 or not a.dtype.isnative:
        a = a.astype(np.float64)
    if not _fits(a.shape, pattern):
        raise ShapeError(what, expected, tuple(a.shape))
    _require_finite(a, what)
    return a


def checked_mesh_arrays(mesh: SkinnedMesh) -> dict[str, Any]:
    """The mesh's arrays checked, as native float64 / int64 (the given arrays where they already are).

    The one check of :class:`SkinnedMesh`, run by its constructor and again by
    :func:`kinema.io.save_gltf` (an array may have been changed in place since).
    Wrong shapes and non-numbers raise :class:`~kinema.ShapeError` (expected
    versus got); NaN or inf, negative weights, weight rows that do not sum to 1
    (:data:`WEIGHT_SUM_TOL`), fractional indices and indices out of range (of the
    vertices for ``indices``, of the inverse bind matrices for ``joints``) raise
    :class:`~kinema.SolverInputError`.  Each message names the mesh and the field.
    """
    pre = f"mesh {mesh.name!r}"
    pos = _float_array(mesh.positions, f"{pre} positions", "(V, 3)", (None, 3))
    n_v = pos.shape[0]
    ibm = _float_array(mesh.inverse_bind_matrices, f"{pre} inverse_bind_matrices", "(J, 4, 4)", (None, 4, 4))
    n_j = ibm.shape[0]
    out: dict[str, Any] = {"positions": pos, "inverse_bind_matrices": ibm}
    for field, width in (("normals", 3), ("uvs", 2)):
        value = getattr(mesh, field)
        if value is not None:
            out[field] = _float_array(value, f"{pre} {field}", f"({n_v}, {width})", (n_v, width))
    out["indices"] = _index_array(mesh.indices, f"{pre} indices", "(T, 3)", (None, 3), n_v, "vertices (positions)",
                                  "vertex")
    joints = _index_array(mesh.joints, f"{pre} joints", f"({n_v}, K) (one row per vertex)", (n_v, None), n_j,
                          "joints (inverse_bind_matrices)", "joint")
    out["joints"] = joints
    w = _float_array(mesh.weights, f"{pre} weights", f"{tuple(joints.shape)} (as joints)", tuple(joints.shape))
    if w.size and w.min() < 0.0:
        i = _first(w < 0.0)
        raise SolverInputError(f"{pre} weights[{i[0]}, {i[1]}] is {_fmt(w[i])}: skin weights must be >= 0")
    sums = row_sums(w)
    if sums.size and float(np.max(np.abs(sums - 1.0))) > WEIGHT_SUM_TOL:
        v = int(np.argmax(np.abs(sums - 1.0) > WEIGHT_SUM_TOL))
        raise SolverInputError(f"{pre} weights: row {v} sums to {_fmt(sums[v])}; each vertex's weights must sum to "
                               f"1 (within {WEIGHT_SUM_TOL:g}): divide each row by its sum")
    out["weights"] = w
    return out


@dataclass(frozen=True)
class SkinnedMesh:
    """Skinned triangle mesh, everything needed to draw it (bind pose, mesh space).

    * ``positions``: ``(V, 3)`` float64 vertex positions (file units, metres in glTF).
    * ``normals``: ``(V, 3)`` unit normals, or None.
    * ``uvs``: ``(V, 2)`` TEXCOORD_0, or None.
    * ``indices``: ``(T, 3)`` int64 triangle vertex indices ``0 .. V - 1`` (strips
      and fans are converted to triangle lists).
    * ``joints``: ``(V, K)`` int64 **skeleton** joint indices (already mapped
      from the file's skin order; ``0 .. J - 1`` for ``J`` inverse bind
      matrices), ``K`` a multiple of 4 in loaded meshes.
    * ``weights``: ``(V, K)`` float64 skin weights >= 0 (unused slots 0), each row
      summing to 1 within :data:`WEIGHT_SUM_TOL`.
    * ``inverse_bind_matrices``: ``(J, 4, 4)`` per skeleton joint, row-major,
      column-vector convention: ``v_joint = IBM @ v_mesh``.
    * ``material``: the glTF material object (JSON dict, textures removed) or None.

    Skinning (glTF linear blend skinning):
    ``v_world = sum_k w_k T_world_joint[j_k] @ IBM[j_k] @ v``.

    The constructor checks every array (:func:`checked_mesh_arrays`: shapes,
    finite numbers, weights >= 0 with rows summing to 1 within
    :data:`WEIGHT_SUM_TOL`, whole indices in range) and keeps them as native
    float64 / int64 (ints, float32 and big-endian arrays are read as the
    numbers they hold; float64 and int64 arrays are kept, not copied).
    """

    positions: FloatArray
    indices: IntArray
    joints: IntArray
    weights: FloatArray
    inverse_bind_matrices: FloatArray
    normals: FloatArray | None = None
    uvs: FloatArray | None = None
    material: dict[str, Any] | None = None
    name: str = "mesh"

    def __post_init__(self) -> None:
        # Frozen: the checked (converted) arrays are set the way dataclasses sets fields.
        for field, value in checked_mesh_arrays(self).items():
            object.__setattr__(self, field, value)

    def check(self) -> None:
        """Check the arrays again (they may have been changed in place since the mesh was made); raises as the
        constructor does.  :func:`kinema.io.save_gltf` calls this before writing."""
        checked_mesh_arrays(self)

    @property
    def n_vertices(self) -> int:
        return int(self.positions.shape[0])

    def skinned_positions(self, skeleton: Skeleton, pose: Pose) -> FloatArray:
        """World vertex positions ``(*batch, V, 3)`` of ``pose`` by linear blend skinning."""
        from .fk import forward_kinematics

        check_skeleton(skeleton, "skinned_positions")
        n_ibm = np.shape(self.inverse_bind_matrices)[0]
        if skeleton.n_joints != n_ibm:
            raise ShapeError("skeleton", f"{n_ibm} joints (one per inverse bind matrix of mesh {self.name!r})",
                             f"{skeleton.n_joints} joints")
        check_pose(skeleton, pose, "skinned_positions")
        check_pose_finite(pose, "skinned_positions")
        fk = forward_kinematics(skeleton, pose, matrices=True)
        assert fk.matrices is not None
        return linear_blend_skinning(self.positions, self.joints, self.weights,
                                     fk.matrices @ self.inverse_bind_matrices)

    @cached_property
    def _bind(self) -> tuple[FloatArray, FloatArray]:
        ibm = np.asarray(self.inverse_bind_matrices, dtype=np.float64)
        pre = f"mesh {self.name!r}: inverse_bind_matrices"
        try:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                bind = np.linalg.inv(ibm)
        except np.linalg.LinAlgError:
            bad = int(np.argmin(np.abs(np.linalg.det(ibm))))
            raise SolverInputError(f"{pre}[{bad}] is singular (no bind "
                                   "transform): an inverse bind matrix must be invertible") from None
        nonfinite = ~np.all(np.isfinite(bind.reshape(bind.shape[0], -1)), axis=1)
        if np.any(nonfinite):
            raise SolverInputError(f"{pre}[{int(np.argmax(nonfinite))}] is nearly singular: its inverse (the bind "
                                   "transform) overflows float64")
        lin = bind[:, :3, :3]
        sign, logdet = np.linalg.slogdet(lin)  # (no overflow: a linear part of 1e200 entries has a finite scale)
        if np.any(sign <= 0.0):
            bad = int(np.argmax(sign <= 0.0))
            kind = "a mirror (negative determinant)" if sign[bad] < 0.0 else "singular in its linear part"
            raise SolverInputError(f"{pre}[{bad}] is {kind}: its bind transform has no rotation (bind_rotations "
                                   "needs a rotation and a scale; skinned_positions takes any matrix)")
        scale = np.exp(logdet / 3.0)[:, None, None]  # the uniform scale: cube root of the determinant
        return bind[:, :3, 3].copy(), rotation.from_matrix(lin / scale)

    @property
    def bind_positions(self) -> FloatArray:
        """``(J, 3)`` each joint's world position at bind time (the translation of ``inverse(IBM)``)."""
        return self._bind[0]

    @property
    def bind_rotations(self) -> FloatArray:
        """``(J, 4)`` xyzw, each joint's world rotation at bind time: the linear part of
        ``inverse(IBM)`` with its uniform scale divided out.

        Posing a joint by the change from its bind transform moves the vertices
        it weighs as :meth:`skinned_positions` does (for similarity transforms):
        ``R_now R_bind^T (v - p_bind) + p_now``, which is how viser skins.
        """
        return self._bind[1]

    def skin_weights(self, n_joints: int) -> FloatArray:
        """Dense ``(V, n_joints)`` weights: row ``v`` holds vertex ``v``'s weight per joint.

        :class:`~kinema.SolverInputError` when a vertex names a joint outside ``0 .. n_joints - 1``.
        """
        if isinstance(n_joints, (bool, np.bool_)) or not isinstance(n_joints, (int, np.integer)) or n_joints < 0:
            raise SolverInputError(f"skin_weights: n_joints must be an integer >= 0, got {n_joints!r}")
        nbytes = 8 * self.n_vertices * int(n_joints)  # (Python ints: no overflow)
        if allocation_refused(nbytes):
            raise SolverInputError(f"skin_weights: n_joints={int(n_joints)} for {self.n_vertices} vertices asks for "
                                   f"{allocation_text(nbytes)}")
        _check_joint_indices(self.joints, n_joints, f"skin_weights: mesh {self.name!r} names a joint outside the "
                             f"{n_joints} joints asked for")
        w = np.zeros((self.n_vertices, n_joints))
        rows = np.repeat(np.arange(self.n_vertices), self.joints.shape[1])
        np.add.at(w, (rows, self.joints.reshape(-1)), self.weights.reshape(-1))
        return w


def _capsule(length: float, radius: float, segments: int, rings: int) -> tuple[FloatArray, FloatArray, IntArray]:
    """Capsule along +z from 0 to ``length``: positions, unit normals, triangles."""
    ring_z: list[float] = []
    ring_r: list[float] = []
    ring_nz: list[float] = []
    for i in range(1, rings + 1):  # bottom cap, from the pole up to the equator
        phi = -0.5 * math.pi + 0.5 * math.pi * i / rings
        ring_z.append(radius * math.sin(phi))
        ring_r.append(math.cos(phi))
        ring_nz.append(math.sin(phi))
    for i in range(rings):  # top cap, from the equator to just below the pole
        phi = 0.5 * math.pi * i / rings
        ring_z.append(length + radius * math.sin(phi))
        ring_r.append(math.cos(phi))
        ring_nz.append(math.sin(phi))
    a = 2.0 * math.pi * np.arange(segments) / segments
    ca, sa = np.cos(a), np.sin(a)
    pos = [np.array([[0.0, 0.0, -radius]])]
    nrm = [np.array([[0.0, 0.0, -1.0]])]
    for z, rr, nz in zip(ring_z, ring_r, ring_nz, strict=True):
        pos.append(np.stack([radius * rr * ca, radius * rr * sa, np.full(segments, z)], axis=1))
        nrm.append(np.stack([rr * ca, rr * sa, np.full(segments, nz)], axis=1))
    pos.append(np.array([[0.0, 0.0, length + radius]]))
    nrm.append(np.array([[0.0, 0.0, 1.0]]))
    n_rings = len(ring_z)
    top = 1 + n_rings * segments
    tris = []
    s = np.arange(segments)
    s1 = (s + 1) % segments
    tris.append(np.stack([np.zeros(segments, dtype=np.int64), 1 + s1, 1 + s], axis=1))
    for i in range(n_rings - 1):
        a0 = 1 + i * segments
        b0 = a0 + segments
        tris.append(np.stack([a0 + s, a0 + s1, b0 + s1], axis=1))
        tris.append(np.stack([a0 + s, b0 + s1, b0 + s], axis=1))
    last = 1 + (n_rings - 1) * segments
    tris.append(np.stack([last + s, last + s1, np.full(segments, top)], axis=1))
    return np.concatenate(pos), np.concatenate(nrm), np.concatenate(tris).astype(np.int64)


#: Bytes :func:`bone_mesh` holds per vertex at its peak, for its allocation check: positions and normals (float64
#: x 3, twice while the capsules are joined), joints (int64 x 4) and weights (float64 x 4), and the index arrays.
BONE_MESH_VERTEX_BYTES = 2 * 2 * 24 + 32 + 32 + 16


def _length(d: FloatArray) -> float:
    """``|d|``: numpy's norm, or where its squares overflow (components near 1e154 and beyond) the scaled one."""
    with np.errstate(over="ignore"):
        n = float(np.linalg.norm(d))
    return n if math.isfinite(n) else float(unit_and_length(d)[1][0])


def _too_large_text(extent: float) -> str:
    return (f"bone_mesh: the skeleton spans {extent:.3g} (file units) at rest: too large for a mesh, its capsules' "
            "coordinates would overflow float64")


def bone_mesh(skeleton: Skeleton, *, radius: float | None = None, segments: int = 8, rings: int = 3) -> SkinnedMesh:
    """A generated skin: one capsule per bone (parent joint to child joint), weighted 1 to the parent.

    ``radius`` defaults to 12% of each bone's rest length.  Built at the rest
    pose in world space with ``IBM = inverse(T_world_joint)``, so posing the
    skeleton moves each capsule rigidly with its bone.  Bones shorter than
    ``BONE_MIN_LENGTH_RATIO`` of the skeleton's extent get no capsule (no
    direction); a skeleton with no such bone gets a sphere on every joint.
    ``radius`` must be a finite number > 0, ``segments`` an integer >= 3 and
    ``rings`` one >= 1, and the mesh they make must stay within
    :data:`~kinema._validate.MAX_ALLOCATION_BYTES` (checked before anything is
    allocated); a skeleton so large that the capsules' coordinates overflow
    float64 is refused too (:class:`~kinema.SolverInputError` for each).
    """
    from .fk import forward_kinematics

    check_skeleton(skeleton, "bone_mesh")
    if radius is not None:
        radius = positive_number(radius, "bone_mesh radius")
    for what, count, least in (("segments", segments, 3), ("rings", rings, 1)):
        if isinstance(count, (bool, np.bool_)) or not isinstance(count, (int, np.integer)) or count < least:
            raise SolverInputError(f"bone_mesh {what} must be an integer >= {least}, got {count!r}")
    segments, rings = int(segments), int(rings)
    # At most one capsule per joint, each of 2 + 2 rings * segments vertices and 4 rings * segments triangles.
    n_caps = skeleton.n_joints
    n_verts = n_caps * (2 + 2 * rings * segments)
    nbytes = n_caps * (2 + 2 * rings * segments) * BONE_MESH_VERTEX_BYTES + n_caps * 4 * rings * segments * 48
    if allocation_refused(nbytes):
        raise SolverInputError(f"bone_mesh: segments={segments} and rings={rings} make up to {n_verts:.3g} vertices "
                               f"for {n_caps} joints: {allocation_text(nbytes)}")

    fk = forward_kinematics(skeleton, skeleton.rest_pose(), matrices=True)
    world = fk.matrices
    assert world is not None
    p = fk.positions
    with np.errstate(over="ignore"):
        extent = float(np.max(np.ptp(p, axis=0))) if skeleton.n_joints > 1 else 0.0
    if not math.isfinite(extent):
        raise SolverInputError(_too_large_text(extent))
    min_len = BONE_MIN_LENGTH_RATIO * extent
    pos_l: list[FloatArray] = []
    nrm_l: list[FloatArray] = []
    tri_l: list[IntArray] = []
    jnt_l: list[IntArray] = []
    base = 0
    z = np.array([0.0, 0.0, 1.0])
    bones = [(int(skeleton.parents[j]), j) for j in range(skeleton.n_joints) if skeleton.parents[j] >= 0]
    bone_len = {b: _length(p[b] - p[a]) for a, b in bones}
    bones = [(a, b) for a, b in bones if bone_len[b] > min_len and extent > 0.0]
    if not bones:
        # Degenerate skeleton (one joint, or all joints on one spot): a sphere per joint.
        r0 = radius if radius is not None else (0.05 * extent if extent > 0.0 else 0.05)
        segs = [(j, j, r0) for j in range(skeleton.n_joints)]
    else:
        segs = [(a, b, radius if radius is not None else 0.12 * bone_len[b]) for a, b in bones]
    for a, b, rad in segs:
        length = bone_len[b] if a != b else 0.0
        if not (math.isfinite(length + 2.0 * rad) and np.all(np.isfinite(np.abs(p[a]) + (length + 2.0 * rad)))):
            raise SolverInputError(_too_large_text(extent))
        cp, cn, ct = _capsule(length, rad, segments, rings)
        qd = rotation.from_two_vectors(z, p[b] - p[a]) if length > 0.0 else np.array([0.0, 0.0, 0.0, 1.0])
        pos_l.append(rotation.rotate(qd, cp) + p[a])
        nrm_l.append(rotation.rotate(qd, cn))
        tri_l.append(ct + base)
        jnt_l.append(np.full(cp.shape[0], a, dtype=np.int64))
        base += cp.shape[0]
    n_v = base
    joints = np.zeros((n_v, 4), dtype=np.int64)
    joints[:, 0] = np.concatenate(jnt_l)
    weights = np.zeros((n_v, 4))
    weights[:, 0] = 1.0
    return SkinnedMesh(
        positions=np.concatenate(pos_l),
        indices=np.concatenate(tri_l),
        joints=joints,
        weights=weights,
        inverse_bind_matrices=np.asarray(np.linalg.inv(world), dtype=np.float64),
        normals=np.concatenate(nrm_l),
        name="bones",
    )


