"""Loading glTF 2.0 (``.gltf``) and GLB (``.glb``): the skin's skeleton, its mesh and every
animation, with keyframe sampling (LINEAR, STEP, CUBICSPLINE) and resampling at a frame rate.

Reading is plain Python over :mod:`kinema.io.gltf.reader`; node transforms and
hierarchy folding are in :mod:`kinema.io.gltf.scene`.
"""

from __future__ import annotations

import math
import numbers
import operator
import os
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from ... import rotation
from ..._types import FloatArray, IntArray
from ..._validate import as_float_scalar
from ...errors import SkeletonError, SolverInputError
from ...mesh import WEIGHT_SUM_TOL, SkinnedMesh, row_sums
from ...pose import TIME_EPS, Clip, Pose, key_brackets, resampled_frame_count
from ...skeleton import ZERO_QUAT_EPS, Skeleton
from .._read import check_path, read_regular
from .bvh_layout import read_clip_fps, read_layout
from .reader import FLOAT, UBYTE, UINT, USHORT, CheckedDoc, ExternalFiles, parse_container, short_repr
from .scene import fold, fold_hierarchy, node_parents, unique_names

__all__ = ["GltfAsset", "load_gltf", "TIME_EPS"]

_PATHS = ("translation", "rotation", "scale", "weights")
_INTERPOLATIONS = ("LINEAR", "STEP", "CUBICSPLINE")

#: Copies of a clip's pose the loader holds at once (local, folded, reordered), for the budget.
_CLIP_COPIES = 3

#: World rest matrices with ``|det|`` below this are singular in float64 (a scale
#: product underflowed): their inverse bind matrices cannot be formed.
_MIN_DET = 1e-290

#: Deepest JSON nesting of a material (its ``extras`` included) that is read; deeper fails.
MAX_MATERIAL_DEPTH = 64

#: With ``fps=None``, an animation with a STEP or CUBICSPLINE channel is resampled at this rate (frames per
#: second) or at its densest channel's mean key rate when that is higher: kinema clips interpolate linearly
#: between frames, so its key times alone would turn steps into ramps and curves into straight lines.
NONLINEAR_KEYS_FPS = 60.0

#: The key rate followed is capped here (keys an exporter put microseconds apart do not set the rate).
NONLINEAR_KEYS_MAX_FPS = 1000.0

#: Interpolations that linear interpolation between key times does not reproduce.
_NONLINEAR = ("STEP", "CUBICSPLINE")


@dataclass(frozen=True)
class GltfAsset:
    """What :func:`load_gltf` returns.

    * ``skeleton``: the skin's joints in depth-first order; the transforms of
      non-joint ancestors are folded into the root(s), so FK gives glTF world
      (scene) space.  ``skeleton.meta`` holds ``"gltf_nodes"`` (node index per
      joint), ``"inverse_bind_matrices"`` and ``"source"`` (the file's absolute,
      resolved path), and ``"gltf_mesh"``
      (the mesh again, kept for code written before ``mesh`` existed here);
      for a file :func:`save_gltf` wrote from a BVH skeleton also
      ``"bvh_channels"`` and ``"bvh_end_site"`` (from the nodes' ``extras``,
      see :mod:`kinema.io.gltf.bvh_layout`), so ``save_bvh`` writes the
      original End Sites and channels.
    * ``clips``: ``{animation name: Clip}`` (see :func:`load_gltf` for times).
    * ``mesh``: the skinned mesh (:class:`kinema.mesh.SkinnedMesh`) or None;
      pass it on as ``save_gltf(..., mesh=asset.mesh)``.
    * ``inverse_bind_matrices``: ``(J, 4, 4)`` in skeleton order.
    * ``nodes``: glTF node index of each skeleton joint.
    * ``skin``: index of the skin read (None: all nodes).
    * ``notes``: what was read but not represented (channels on nodes outside
      the skeleton, morph weights, point/line primitives and primitives
      without a triangle), and STEP / CUBICSPLINE animations resampled at a
      fixed rate (``fps=None``), with JSON paths.
    * ``document``: the parsed glTF JSON (for anything else in the file).
    """

    skeleton: Skeleton
    clips: dict[str, Clip]
    mesh: SkinnedMesh | None
    inverse_bind_matrices: FloatArray
    nodes: tuple[int, ...]
    skin: int | None
    path: str
    notes: tuple[str, ...]
    document: dict[str, Any]


def _sample(times: FloatArray, values: FloatArray, interp: str, query: FloatArray, is_rotation: bool) -> FloatArray:
    """Evaluate one sampler at ``query`` times ``(F,)``; ``values`` is ``(K, n)`` (``(3K, n)`` for CUBICSPLINE).

    Before the first key and after the last the end values hold (glTF spec).
    LINEAR: lerp, slerp for rotations.  STEP: the key at or before t.
    CUBICSPLINE: ``p = (2u^3-3u^2+1) v_k + (u^3-2u^2+u) d b_k + (-2u^3+3u^2) v_k1 + (u^3-u^2) d a_k1``
    with ``d = t_k1 - t_k``, in-tangent ``a``, out-tangent ``b``; rotations normalised.
    """
    k = times.shape[0]
    i0, i1, u = key_brackets(times, query)
    d = times[i1] - times[i0]
    if interp == "CUBICSPLINE":
        tri = values.reshape(k, 3, -1)
        a, v, b = tri[:, 0], tri[:, 1], tri[:, 2]
        u2 = u * u
        u3 = u2 * u
        h00 = (2 * u3 - 3 * u2 + 1)[:, None]
        h10 = (u3 - 2 * u2 + u)[:, None]
        h01 = (-2 * u3 + 3 * u2)[:, None]
        h11 = (u3 - u2)[:, None]
        dd = d[:, None]
        out = h00 * v[i0] + h10 * dd * b[i0] + h01 * v[i1] + h11 * dd * a[i1]
        if is_rotation:
            norm = np.linalg.norm(out, axis=1, keepdims=True)
            # Tangents can cancel the values to a zero quaternion: fall back to the key before.
            bad = norm[:, 0] < ZERO_QUAT_EPS
            out = np.where(bad[:, None], v[i0], out / np.where(bad[:, None], 1.0, norm))
            out = out / np.linalg.norm(out, axis=1, keepdims=True)
        return out
    if interp == "STEP":
        out = values[i0]
    elif is_rotation:
        out = rotation.slerp(values[i0], values[i1], u)
    else:
        out = values[i0] + u[:, None] * (values[i1] - values[i0])
    return np.array(out, dtype=np.float64)


def load_gltf(path: str | os.PathLike[str], *, skin: int | str | None = 0, fps: float | None = None,
              external: ExternalFiles | None = None) -> GltfAsset:
    """Read a glTF 2.0 ``.gltf`` or ``.glb`` file: skeleton of a skin, its mesh, and all animations.

    * ``skin``: index (an int or numpy integer, not a bool) or name (a str)
      of the skin to read (default the first); None makes every node a joint,
      and so does the default on a file without a skin (e.g. a rigid rig;
      ``notes`` says so).
    * ``fps``: None keeps the key times: each clip's frames are the union of
      its channels' key times (``clip.times``, seconds) and ``clip.fps`` is
      the mean key rate ``(frames - 1) / (times[-1] - times[0])`` (1.0 for a
      single key); a clip kinema wrote evenly spaced (its animation's
      ``extras.kinema_clip.fps``, key times exactly ``float32(k / fps)``)
      comes back at that rate with ``clip.times`` None.  A number resamples every clip at ``k / fps`` for
      ``k = 0 .. ceil(t_end * fps)`` (``clip.times`` is None): frame 0 is at
      the animation's t = 0 and the last frame covers the last key.
      Exception to None: kinema clips interpolate linearly between frames,
      so an animation with any STEP or CUBICSPLINE channel is resampled as a
      number would, at :data:`NONLINEAR_KEYS_FPS` (60) or, when higher, the
      mean key rate ``(K - 1) / (t[K-1] - t[0])`` of its densest channel
      (capped at :data:`NONLINEAR_KEYS_MAX_FPS`; back to 60 when that would
      not fit the decoding budget), and ``notes`` names the animation and
      the rate.  Its key times alone would make steps ramps and curves
      straight lines (also in a file saved from the clip).

    Skeleton: the skin's joints (plus any non-joint node between them whose
    transform is not a similarity) in depth-first order; the rest pose is
    each node's TRS (matrices decomposed); transforms of non-joint ancestors
    (similarities) are folded into the joint below them, so FK is in glTF
    world space and ``FK @ IBM`` reproduces the file's skinning.  Unnamed
    joints are named ``node_<index>``.  Animated channels on nodes outside the
    skeleton and morph ``weights`` are not represented (see ``notes``).

    External buffers are read only from the file's own folder (or below it,
    after percent-decoding and resolving symlinks) and only from regular
    files; every count is checked against its bufferView and against the
    file's decoding budget (``DECODE_BUDGET_FLOOR`` plus
    ``DECODE_BUDGET_FACTOR`` per byte of file data) before anything is
    allocated.  ``external``: the file's external buffers as
    :func:`kinema.io.gltf.reader.read_external` read them in the file's own
    folder, for a copy of the file loaded elsewhere (a batch's Dask worker):
    they are taken from there, and nothing but ``path`` is read.

    Skin weights: a vertex whose weights do not sum to 1 (within
    :data:`kinema.mesh.WEIGHT_SUM_TOL`; exporters write such files) has them
    divided by their sum, and one with no weight at all gets weight 1 on its
    first influence's joint (``notes`` says which); negative weights are
    refused.  Every other vertex keeps the file's weights.

    Raises :class:`kinema.FileFormatError` (file and JSON path) for anything
    malformed or refused (a FIFO or device given as the file is refused too),
    :class:`FileNotFoundError` for a missing file and
    :class:`kinema.SolverInputError` for a bad ``path`` (not a ``str`` or
    ``os.PathLike``, or holding a NUL character), ``fps``, ``external`` or
    ``skin`` (of another type than those above; a number may be NumPy's, or a
    0-d array of one).
    """
    spath = check_path(path)
    if fps is not None:
        fps = _check_fps(fps)
    if external is not None and not isinstance(external, ExternalFiles):
        raise SolverInputError(f"load_gltf: external must be the ExternalFiles of read_external or None, got "
                               f"{short_repr(external)} ({type(external).__name__})")
    if isinstance(skin, np.ndarray) and skin.ndim == 0:
        skin = skin[()]  # a 0-d array: the index or name it holds
    if isinstance(skin, numbers.Integral) and not isinstance(skin, bool):
        skin = operator.index(skin)  # a numpy integer: the plain int it holds
    elif skin is not None and not isinstance(skin, str):
        raise SolverInputError(f"load_gltf: skin must be a skin index (int), a skin name (str) or None, got "
                               f"{short_repr(skin)} ({type(skin).__name__})")
    data = read_regular(spath)
    doc, glb_bin = parse_container(spath, data)
    r = CheckedDoc(spath, doc, glb_bin, os.path.dirname(os.path.abspath(spath)), doc_bytes=len(data),
                   external=external)
    # Extreme values (1e308) may overflow on the way; every result is checked for finiteness instead.
    with np.errstate(all="ignore"):
        return _load(r, skin, fps)


def _check_fps(fps: Any) -> float:
    """``fps`` as a positive finite float: a real number (NumPy's, and a 0-d array of one, as the number it
    holds); :class:`kinema.SolverInputError` otherwise (a bool, a string, NaN, inf, zero or less)."""
    try:
        v = as_float_scalar(fps, "fps")
    except SolverInputError:
        v = math.nan  # not a number: refused below, with the message every bad fps gets
    if not (math.isfinite(v) and v > 0):
        raise SolverInputError(f"load_gltf: fps must be a positive finite number or None, got {short_repr(fps)}")
    return v


def _load(r: CheckedDoc, skin: int | str | None, fps: float | None) -> GltfAsset:
    notes: list[str] = []
    parent = node_parents(r)
    n_nodes = len(parent)
    skins = r.top("skins")
    skin_index: int | None
    if skin == 0 and not skins and not isinstance(skin, bool):
        notes.append("the file has no skin: every node is a joint")
        skin = None
    if skin is None:
        skin_index = None
        joints = list(range(n_nodes))
        if not joints:
            r.fail("nodes", "the file has no nodes")
        ibm_skin = None
    else:
        if isinstance(skin, str):
            skin_names = [s.get("name") if isinstance(s, dict) else None for s in skins]
            if skin not in skin_names:
                r.fail("skins", f"no skin named {short_repr(skin)} (skins: {short_repr(skin_names)})")
            skin_index = skin_names.index(skin)
        else:
            if not 0 <= int(skin) < len(skins):
                hint = "; use skin=None to read every node as a joint" if not skins else ""
                r.fail("skins", f"no skin {skin} (the file has {len(skins)} skins){hint}")
            skin_index = int(skin)
        ws = f"skins[{skin_index}]"
        sk = r.item("skins", skin_index)
        raw_joints = r.array(sk, "joints", ws)
        if not raw_joints:
            r.fail(f"{ws}.joints", "is empty")
        joints = [r.ref_value(j, f"{ws}.joints[{k}]", "nodes") for k, j in enumerate(raw_joints)]
        if len(set(joints)) != len(joints):
            r.fail(f"{ws}.joints", "lists a node twice")
        ibm_acc = r.ref(sk, "inverseBindMatrices", ws, "accessors", required=False)
        ibm_skin = None
        if ibm_acc is not None:
            arr = r.accessor(ibm_acc, f"{ws}.inverseBindMatrices", ("MAT4",), (FLOAT,), "float")
            if arr.shape[0] < len(joints):
                r.fail(f"accessors[{ibm_acc}].count", f"is {arr.shape[0]}, fewer than the {len(joints)} joints "
                                                       f"of {ws}")
            ibm_skin = arr[: len(joints)].reshape(-1, 4, 4).transpose(0, 2, 1)

    # Skeleton members: the joints, plus non-joint nodes whose folded transform
    # between two members (or above a root) would not be a similarity.
    folded = fold_hierarchy(r, parent, joints)
    members, mparents = folded.members, folded.parents
    nm = len(members)
    ft, fq, fs = fold(*folded.prefix, *folded.rest)
    names = unique_names(r, members)
    try:
        tmp, order = Skeleton.from_unordered(names, mparents, ft, fq, fs)
    except SkeletonError as exc:  # e.g. a scale that underflows to 0 or a translation that overflows
        r.fail("nodes", f"the skin's node transforms do not make a valid skeleton: {exc}")
    new_of_old = np.empty(nm, dtype=np.int64)
    new_of_old[order] = np.arange(nm)

    from ...fk import forward_kinematics

    world = forward_kinematics(tmp, tmp.rest_pose(), matrices=True).matrices
    assert world is not None
    if not np.all(np.isfinite(world)) or np.any(np.abs(np.linalg.det(world[:, :3, :3])) < _MIN_DET):
        r.fail("nodes", "the skin's rest transforms overflow or collapse (values far too large or small)")
    ibm: FloatArray = np.asarray(np.linalg.inv(world), dtype=np.float64)  # kept for non-skin members
    if skin_index is not None:
        src = ibm_skin if ibm_skin is not None else np.broadcast_to(np.eye(4), (len(joints), 4, 4))
        for old in range(len(joints)):
            ibm[new_of_old[old]] = src[old]
    ibm.setflags(write=False)

    mesh = None
    if skin_index is not None:
        mesh = _read_mesh(r, skin_index, len(joints), new_of_old, ibm, notes)

    node_of_joint = tuple(int(members[o]) for o in order)
    meta: dict[str, object] = {
        "format": "gltf",
        "source": os.path.realpath(r.path),  # resolved: the writers' input check must not depend on the cwd
        "source_files": r.files_read,  # external buffers: inputs too (see kinema.io._atomic.source_files)
        "gltf_nodes": node_of_joint,
        "gltf_skin": skin_index,
        "inverse_bind_matrices": ibm,
        "gltf_mesh": mesh,
    }
    # A file save_gltf wrote from a BVH skeleton: its End Sites and channels, for save_bvh.
    layout = read_layout(r, node_of_joint, notes)
    if layout is not None:
        meta["bvh_channels"], meta["bvh_end_site"] = layout
    skeleton = Skeleton(tmp.names, tmp.parents, tmp.translations, tmp.rotations, tmp.scales, meta=meta)

    clips = _read_animations(r, members, order, folded.prefix, folded.rest, fps, notes)
    return GltfAsset(skeleton=skeleton, clips=clips, mesh=mesh, inverse_bind_matrices=ibm, nodes=node_of_joint,
                     skin=skin_index, path=r.path, notes=tuple(notes), document=r.doc)


def _strip_textures(r: CheckedDoc, obj: Any, where: str, depth: int = 0) -> Any:
    """A copy of material ``obj`` without texture references (a re-saved file carries no images).

    Values nested deeper than :data:`MAX_MATERIAL_DEPTH` (in ``extras``, say) fail at their JSON path.
    """
    if depth > MAX_MATERIAL_DEPTH:
        r.fail(where, f"nested deeper than {MAX_MATERIAL_DEPTH} levels (a material kept for saving may not be)")
    if isinstance(obj, dict):
        return {k: _strip_textures(r, v, f"{where}.{k}", depth + 1) for k, v in obj.items()
                if not k.endswith("Texture") and k != "extensions"}
    if isinstance(obj, list):
        return [_strip_textures(r, v, f"{where}[{i}]", depth + 1) for i, v in enumerate(obj)]
    return obj


def _normalized_weights(w: FloatArray, where: str, notes: list[str]) -> FloatArray:
    """A primitive's skin weights ``(V, K)`` (>= 0, a fresh array) with every row that does not sum to 1 (within
    :data:`kinema.mesh.WEIGHT_SUM_TOL`) repaired, each repair noted.

    The glTF spec asks for sums of 1, but exporters write others (Blender cuts influences to four without
    renormalising; quantised weights lose a few 1/255): a row is divided by its sum, as three.js does on
    load.  A row of zeros (a vertex no joint moves, which glTF skinning would put at the origin) gets weight 1
    on its first influence's joint.  Rows that sum to 1 are kept as they are in the file.
    """
    sums = row_sums(w)
    off = np.abs(sums - 1.0) > WEIGHT_SUM_TOL
    if not np.any(off):
        return w
    zero = sums == 0.0
    scaled = off & ~zero
    if np.any(scaled):
        v = int(np.argmax(scaled))
        n = int(np.count_nonzero(scaled))
        notes.append(f"{where}: the skin weights (WEIGHTS_*) of {n} {'vertex' if n == 1 else 'vertices'} do not sum "
                     f"to 1 (vertex {v}: {sums[v]:.6g}); divided by their sum")
        w[scaled] /= sums[scaled, None]
    if np.any(zero):
        n = int(np.count_nonzero(zero))
        notes.append(f"{where}: {n} {'vertex has' if n == 1 else 'vertices have'} no skin weight (WEIGHTS_* all 0, "
                     f"first: vertex {int(np.argmax(zero))}); bound to the joint of the first influence (JOINTS_0)")
        w[zero, 0] = 1.0
    return w


def _read_mesh(r: CheckedDoc, skin_index: int, n_skin_joints: int, new_of_old: IntArray, ibm: FloatArray,
               notes: list[str]) -> SkinnedMesh | None:
    nodes = r.top("nodes")
    mesh_ids: list[int] = []
    for n in range(len(nodes)):
        node = r.item("nodes", n)
        if node.get("skin") == skin_index and "mesh" in node and node["mesh"] not in mesh_ids:
            mesh_ids.append(node["mesh"])
    if not mesh_ids:
        return None
    pos_l: list[FloatArray] = []
    nrm_l: list[FloatArray | None] = []
    uv_l: list[FloatArray | None] = []
    tri_l: list[IntArray] = []
    jnt_l: list[IntArray] = []
    wgt_l: list[FloatArray] = []
    material: dict[str, Any] | None = None
    name = None
    base = 0
    for mi in mesh_ids:
        wm = f"meshes[{mi}]"
        mesh = r.item("meshes", mi)
        name = name or r.string(mesh, "name", wm)
        prims = r.array(mesh, "primitives", wm)
        if not prims:
            r.fail(f"{wm}.primitives", "is empty")
        for pi, prim in enumerate(prims):
            w = f"{wm}.primitives[{pi}]"
            if not isinstance(prim, dict):
                r.fail(w, "must be an object")
            attrs = r.obj(prim, "attributes", w)
            assert attrs is not None
            mode = r.integer(prim, "mode", w, default=4, hi=6)
            if mode not in (4, 5, 6):
                notes.append(f"{w}: mode {mode} (points or lines) is not a triangle mesh; skipped")
                continue
            wa = f"{w}.attributes"
            pa = r.ref(attrs, "POSITION", wa, "accessors")
            assert pa is not None
            p = r.accessor(pa, f"{wa}.POSITION", ("VEC3",), (FLOAT,), "float")
            nv = p.shape[0]

            def attr(key: str, types: tuple[str, ...], cts: tuple[int, ...], kind: Literal["float", "int"],
                     *, wa: str = wa, nv: int = nv, attrs: dict[str, Any] = attrs) -> NDArray[Any] | None:
                a = r.ref(attrs, key, wa, "accessors", required=False)
                if a is None:
                    return None
                arr = r.accessor(a, f"{wa}.{key}", types, cts, kind)
                if arr.shape[0] != nv:
                    r.fail(f"accessors[{a}].count", f"is {arr.shape[0]} but POSITION has {nv} vertices ({wa}.{key})")
                return arr

            nrm = attr("NORMAL", ("VEC3",), (FLOAT,), "float")
            uv = attr("TEXCOORD_0", ("VEC2",), (FLOAT, UBYTE, USHORT), "float")
            js: list[IntArray] = []
            ws: list[FloatArray] = []
            k = 0
            while f"JOINTS_{k}" in attrs or f"WEIGHTS_{k}" in attrs:
                j = attr(f"JOINTS_{k}", ("VEC4",), (UBYTE, USHORT), "int")
                wt = attr(f"WEIGHTS_{k}", ("VEC4",), (FLOAT, UBYTE, USHORT), "float")
                if j is None or wt is None:
                    r.fail(wa, f"JOINTS_{k} and WEIGHTS_{k} must come together")
                if j.max() >= n_skin_joints:
                    r.fail(f"accessors[{attrs[f'JOINTS_{k}']}]",
                           f"joint index {int(j.max())} is out of range for skins[{skin_index}] "
                           f"({n_skin_joints} joints)")
                js.append(j)
                ws.append(wt)
                k += 1
            if not js:
                r.fail(wa, f"a mesh skinned by skins[{skin_index}] needs JOINTS_0 and WEIGHTS_0")
            ia = r.ref(prim, "indices", w, "accessors", required=False)
            if ia is None:
                idx = np.arange(nv, dtype=np.int64)
            else:
                idx = r.accessor(ia, f"{w}.indices", ("SCALAR",), (UBYTE, USHORT, UINT), "int")[:, 0]
                if idx.size and idx.max() >= nv:
                    r.fail(f"accessors[{ia}]", f"vertex index {int(idx.max())} is out of range ({nv} vertices)")
            if mode == 4:
                if idx.size % 3:
                    r.fail(f"accessors[{ia}].count" if ia is not None else wa,
                           f"{idx.size} indices is not a multiple of 3 (TRIANGLES)")
                tris = idx.reshape(-1, 3)
            elif idx.size < 3:
                tris = np.zeros((0, 3), dtype=np.int64)
            elif mode == 5:  # TRIANGLE_STRIP: odd triangles swap their first two vertices
                i = np.arange(idx.size - 2)
                even = (i % 2) == 0
                tris = np.stack([np.where(even, idx[i], idx[i + 1]), np.where(even, idx[i + 1], idx[i]),
                                 idx[i + 2]], axis=1)
            else:  # TRIANGLE_FAN
                i = np.arange(1, idx.size - 1)
                tris = np.stack([np.full(i.size, idx[0]), idx[i], idx[i + 1]], axis=1)
            if tris.shape[0] == 0:
                # A strip or fan of fewer than 3 indices: nothing to draw, and a mesh without triangles
                # cannot be saved; its vertices go with it.
                notes.append(f"{w}: mode {mode} with {idx.size} {'index' if idx.size == 1 else 'indices'} makes "
                             "no triangle; skipped")
                continue
            for k, wt in enumerate(ws):  # the spec's MUST; SkinnedMesh refuses them too
                if wt.min() < 0.0:
                    v, c = (int(i) for i in np.argwhere(wt < 0.0)[0])
                    r.fail(f"accessors[{attrs[f'WEIGHTS_{k}']}]",
                           f"skin weight {wt[v, c]:.6g} of vertex {v} ({wa}.WEIGHTS_{k}) is negative; glTF skin "
                           "weights must not be negative")
            pos_l.append(p)
            nrm_l.append(nrm)
            uv_l.append(uv)
            tri_l.append(tris + base)
            jnt_l.append(np.concatenate(js, axis=1))
            wgt_l.append(_normalized_weights(np.concatenate(ws, axis=1), wa, notes))
            base += nv
            if material is None and "material" in prim:
                mat_i = r.ref(prim, "material", w, "materials")
                assert mat_i is not None
                material = _strip_textures(r, r.item("materials", mat_i), f"materials[{mat_i}]")
    if not pos_l:
        return None
    kmax = max(j.shape[1] for j in jnt_l)
    jnt = np.concatenate([np.pad(j, ((0, 0), (0, kmax - j.shape[1]))) for j in jnt_l])
    wgt = np.concatenate([np.pad(w_, ((0, 0), (0, kmax - w_.shape[1]))) for w_ in wgt_l])
    normals: FloatArray | None = None
    if all(n is not None for n in nrm_l):
        normals = np.concatenate([n for n in nrm_l if n is not None])
    uvs: FloatArray | None = None
    if all(u is not None for u in uv_l):
        uvs = np.concatenate([u for u in uv_l if u is not None])
    return SkinnedMesh(
        positions=np.concatenate(pos_l),
        indices=np.concatenate(tri_l).astype(np.int64),
        joints=new_of_old[jnt],
        weights=wgt,
        inverse_bind_matrices=ibm,
        normals=normals,
        uvs=uvs,
        material=material,
        name=name or "mesh",
    )


def _read_animations(r: CheckedDoc, members: list[int], order: IntArray,
                     prefix: tuple[FloatArray, FloatArray, FloatArray],
                     rest: tuple[FloatArray, FloatArray, FloatArray],
                     fps: float | None, notes: list[str]) -> dict[str, Clip]:
    pos = {n: k for k, n in enumerate(members)}
    nm = len(members)
    clips: dict[str, Clip] = {}
    for ai, anim in enumerate(r.top("animations")):
        wa = f"animations[{ai}]"
        if not isinstance(anim, dict):
            r.fail(wa, "must be an object")
        samplers = r.array(anim, "samplers", wa)
        channels = r.array(anim, "channels", wa)
        name = r.string(anim, "name", wa) or f"animation_{ai}"
        base_name, k = name, 1
        while name in clips:
            k += 1
            name = f"{base_name}_{k}"
        # (member index, path) -> (key times, values, interpolation)
        tracks: dict[tuple[int, str], tuple[FloatArray, FloatArray, str]] = {}
        for ci, ch in enumerate(channels):
            wc = f"{wa}.channels[{ci}]"
            if not isinstance(ch, dict):
                r.fail(wc, "must be an object")
            si = r.integer(ch, "sampler", wc, hi=len(samplers) - 1)
            target = r.obj(ch, "target", wc)
            assert target is not None
            path = target.get("path")
            if path not in _PATHS:
                r.fail(f"{wc}.target.path", f"is {short_repr(path)}, not one of {list(_PATHS)}")
            node = r.ref(target, "node", f"{wc}.target", "nodes", required=False)
            if node is None:
                notes.append(f"{wc}: no target node (extension target); ignored")
                continue
            ws = f"{wa}.samplers[{si}]"
            sampler = samplers[si]
            if not isinstance(sampler, dict):
                r.fail(ws, "must be an object")
            interp = sampler.get("interpolation", "LINEAR")
            if interp not in _INTERPOLATIONS:
                r.fail(f"{ws}.interpolation", f"is {short_repr(interp)}, not one of {list(_INTERPOLATIONS)}")
            ia = r.ref(sampler, "input", ws, "accessors")
            oa = r.ref(sampler, "output", ws, "accessors")
            assert ia is not None and oa is not None
            times = r.accessor(ia, f"{ws}.input", ("SCALAR",), (FLOAT,), "float")[:, 0]
            if np.any(np.diff(times) <= 0.0):
                r.fail(f"accessors[{ia}]", f"animation key times ({ws}.input) must strictly increase")
            if path == "weights":
                notes.append(f"{wc}: morph target weights are not represented; ignored")
                continue
            if path == "rotation":
                vals = r.accessor(oa, f"{ws}.output", ("VEC4",), (FLOAT, 5120, UBYTE, 5122, USHORT), "float")
            else:
                vals = r.accessor(oa, f"{ws}.output", ("VEC3",), (FLOAT,), "float")
            need = times.size * (3 if interp == "CUBICSPLINE" else 1)
            if vals.shape[0] != need:
                r.fail(f"accessors[{oa}].count", f"is {vals.shape[0]}, {interp} with {times.size} keys needs {need}")
            if interp == "CUBICSPLINE" and times.size < 2:
                r.fail(f"accessors[{ia}].count", "CUBICSPLINE needs at least 2 keys")
            if path == "rotation":
                keyv = vals.reshape(times.size, -1, 4)[:, 1 if interp == "CUBICSPLINE" else 0]
                if np.any(np.linalg.norm(keyv, axis=1) < ZERO_QUAT_EPS):
                    r.fail(f"accessors[{oa}]", "holds a zero rotation quaternion")
                if interp != "CUBICSPLINE":
                    vals = vals / np.linalg.norm(vals, axis=1, keepdims=True)
            if path == "scale" and interp != "CUBICSPLINE" and np.any(vals <= 0.0):
                notes.append(f"{wc}: zero or negative animated scale clamped to {ZERO_QUAT_EPS}")
            if node not in pos:
                notes.append(f"{wc}: node {node} is not part of the skeleton; its {path} is ignored")
                continue
            key = (pos[node], path)
            if key in tracks:
                r.fail(f"{wc}.target", f"node {node} {path} is animated twice in {wa}")
            tracks[key] = (times, vals, interp)
        if not tracks:
            if channels:
                notes.append(f"{wa} ({name!r}): no channel animates the skeleton; no clip")
            continue
        t_end = max(float(t[-1]) for t, _, _ in tracks.values())
        # Local, folded and reordered poses: three copies of frames x joints x 10 float64.
        frame_bytes = nm * 10 * 8 * _CLIP_COPIES
        rate = fps
        nonlinear = sorted({interp for _, _, interp in tracks.values() if interp in _NONLINEAR})
        if rate is None and nonlinear:
            rate = _nonlinear_rate(tracks, t_end, frame_bytes, r.budget_left)
        if rate is None:
            query = np.unique(np.concatenate([t for t, _, _ in tracks.values()]))
            n_frames = int(query.size)
            what = f"{n_frames} key times for {nm} joints"
        else:
            span = t_end * rate
            if not math.isfinite(span):
                r.fail(wa, f"resampling {t_end:g} s at {rate:g} fps gives too many frames")
            n_frames = resampled_frame_count(span)
            what = f"resampling {t_end:g} s at {rate:g} fps ({n_frames:.3g} frames, {nm} joints)"
            if fps is None:
                what += f" for its {' and '.join(nonlinear)} keys (pass fps= for another rate)"
        r.charge(n_frames * frame_bytes, wa, what)
        if rate is not None:
            query = np.arange(n_frames) / float(rate)
            if fps is None:
                notes.append(f"{wa} ({name!r}): {' and '.join(nonlinear)} keys resampled at {rate:g} fps "
                             f"({n_frames} frame{'' if n_frames == 1 else 's'} from t = 0): kinema clips interpolate "
                             "linearly between frames")
        nf = query.size
        lt = np.broadcast_to(rest[0], (nf, nm, 3)).copy()
        lq = np.broadcast_to(rest[1], (nf, nm, 4)).copy()
        ls = np.broadcast_to(rest[2], (nf, nm, 3)).copy()
        for (m, path), (times, vals, interp) in tracks.items():
            out = _sample(times, vals, interp, query, path == "rotation")
            if path == "translation":
                lt[:, m] = out
            elif path == "rotation":
                lq[:, m] = out
            else:
                # A keyed scale of 0 (hiding a part) has no place in a kinema skeleton: clamp it tiny.
                ls[:, m] = np.maximum(out, ZERO_QUAT_EPS)
        ft, fq, fs = fold(*prefix, lt, lq, ls)
        pose = Pose(ft[:, order], fq[:, order], fs[:, order])
        kept = read_clip_fps(r, anim, wa, query, notes) if rate is None else None
        if kept is not None:  # a clip kinema wrote evenly spaced: back at its own rate, exactly
            clips[name] = Clip(pose, kept)
        elif rate is None:
            span = float(query[-1] - query[0])
            mean_fps = (nf - 1) / span if nf > 1 else 1.0
            clips[name] = Clip(pose, mean_fps, times=query)
        else:
            clips[name] = Clip(pose, float(rate))
    return clips


def _nonlinear_rate(tracks: dict[tuple[int, str], tuple[FloatArray, FloatArray, str]], t_end: float,
                    frame_bytes: int, budget_left: int) -> float:
    """The rate (frames per second) an animation with STEP or CUBICSPLINE channels is resampled at for ``fps=None``.

    :data:`NONLINEAR_KEYS_FPS`, or the mean key rate ``(K - 1) / (t[K-1] - t[0])`` of the densest channel
    (``tracks``: key times ``(K,)`` seconds, values, interpolation) when higher, capped at
    :data:`NONLINEAR_KEYS_MAX_FPS`.  ``t_end``: the last key time (seconds); ``frame_bytes``: what one frame
    costs the decoding budget, of which ``budget_left`` bytes are left: a rate above the base one whose
    frames would not fit falls back to the base rate (charged by the caller, which fails if even that does
    not fit).
    """
    key_rate = max(((t.size - 1) / float(t[-1] - t[0]) for t, _, _ in tracks.values() if t.size > 1), default=0.0)
    rate = max(NONLINEAR_KEYS_FPS, min(key_rate, NONLINEAR_KEYS_MAX_FPS))
    if rate > NONLINEAR_KEYS_FPS and resampled_frame_count(t_end * rate) * frame_bytes > budget_left:
        rate = NONLINEAR_KEYS_FPS
    return rate
