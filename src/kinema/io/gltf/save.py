"""Writing glTF 2.0 (``.gltf``, buffer embedded as base64) and GLB: :func:`save_gltf`.

The document is built with ``pygltflib`` (the ``io`` extra, imported on first
use) and written through :func:`kinema.io._atomic.atomic_write`.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from ... import rotation
from ...errors import FileFormatError, ShapeError, SolverInputError
from ...mesh import SkinnedMesh, bone_mesh
from ...pose import Clip
from ...skeleton import ZERO_QUAT_EPS, Skeleton, check_skeleton
from .._read import check_path
from .bvh_layout import clip_extras, layout_extras
from .reader import ARRAY_BUFFER, COMPONENTS, ELEMENT_ARRAY_BUFFER, FLOAT, UBYTE, UINT, USHORT, ceil4, short_repr

__all__ = ["save_gltf"]

#: Largest magnitude a glTF float (float32) holds.
_F32_MAX = float(np.finfo(np.float32).max)


def _check_f32(arr: NDArray[Any], what: str, names: tuple[str, ...] | None = None) -> None:
    """SolverInputError unless every value of ``arr`` is finite and within float32 range.

    With ``names`` (one per row of ``arr``) the message names the first bad row's joint.
    """
    ok = np.abs(np.asarray(arr, dtype=np.float64)) <= _F32_MAX
    if not np.all(ok):
        if names is not None:
            what += f" of joint {short_repr(names[int(np.argmin(np.all(ok.reshape(len(names), -1), axis=1)))])}"
        raise SolverInputError(f"{what}: values NaN, infinite or beyond float32 range (|x| > {_F32_MAX:.4g}); "
                               "glTF stores float32")


class _Blob:
    """Binary buffer under construction: one bufferView per accessor, 4-byte aligned."""

    def __init__(self) -> None:
        import pygltflib

        self.g = pygltflib
        self.data = bytearray()
        self.views: list[Any] = []
        self.accessors: list[Any] = []

    def add(self, arr: NDArray[Any], ct: int, typ: str, *, what: str, target: int | None = None,
            minmax: bool = False, normalized: bool = False) -> int:
        """Append ``arr`` as an accessor of component type ``ct``; ``what`` names it in errors."""
        if ct == FLOAT:
            _check_f32(arr, what)
        dt, _ = COMPONENTS[ct]
        a = np.ascontiguousarray(arr, dtype=dt)
        count = a.shape[0]
        raw = a.tobytes()
        off = len(self.data)
        self.data += raw
        self.data += b"\0" * (-len(self.data) % 4)
        self.views.append(self.g.BufferView(buffer=0, byteOffset=off, byteLength=len(raw), target=target))
        acc = self.g.Accessor(bufferView=len(self.views) - 1, byteOffset=0, componentType=ct, count=count, type=typ,
                              normalized=True if normalized else None)
        if minmax:
            flat = a.reshape(count, -1)
            cast = float if ct == FLOAT else int
            acc.min = [cast(x) for x in flat.min(axis=0)]
            acc.max = [cast(x) for x in flat.max(axis=0)]
        self.accessors.append(acc)
        return len(self.accessors) - 1


def _check_mesh(mesh: SkinnedMesh, skeleton: Skeleton) -> None:
    # Name and material go to the JSON as is: load_gltf reads back only a string name and an object material.
    if not isinstance(mesh.name, str):
        raise SolverInputError(f"save_gltf: the mesh name must be a string, got {short_repr(mesh.name)} "
                               f"(type {type(mesh.name).__name__})")
    if mesh.material is not None and not isinstance(mesh.material, dict):
        raise SolverInputError(f"save_gltf: mesh {short_repr(mesh.name)}: material must be a dict (a glTF material "
                               f"object) or None, got a {type(mesh.material).__name__}")
    # Every array again, as the constructor checked them: numpy arrays can have been changed in place since.
    mesh.check()
    nj = skeleton.n_joints
    if mesh.n_vertices < 1:
        raise ShapeError(f"mesh {short_repr(mesh.name)} positions", "(V, 3) with V >= 1",
                         tuple(mesh.positions.shape))
    if mesh.inverse_bind_matrices.shape != (nj, 4, 4):
        raise ShapeError(f"mesh {short_repr(mesh.name)} inverse_bind_matrices", f"({nj}, 4, 4) (one per skeleton "
                         "joint)", tuple(mesh.inverse_bind_matrices.shape))


def save_gltf(
    path: str | os.PathLike[str],
    skeleton: Skeleton,
    clips: Mapping[str, Clip] | Clip | None = None,
    mesh: SkinnedMesh | Literal["bones"] | bool | None = None,
) -> None:
    """Write ``skeleton``, ``clips`` and a skinned mesh as glTF 2.0 (``.gltf``: one JSON file,
    buffer embedded as base64) or GLB (``.glb``), chosen by the extension.

    * ``clips``: ``{name: Clip}`` (a single Clip is named ``"clip"``); each
      becomes one animation, LINEAR, with one key per frame at ``clip.times``
      or ``k / clip.fps``.  Channels whose values equal the rest pose on every
      frame are left out (the rest pose is the node's TRS).  A clip of zero
      frames writes no animation (glTF has no empty animation).
    * ``mesh``: a :class:`kinema.mesh.SkinnedMesh` (e.g. ``asset.mesh`` of
      :func:`load_gltf`) writes that mesh; ``"bones"`` writes :func:`bone_mesh`
      (capsules along the bones, so a BVH clip opens in any glTF viewer);
      False writes no mesh; None (default) writes the mesh the skeleton was
      loaded with, if any (``skeleton.meta["gltf_mesh"]``, read for backwards
      compatibility: pass ``mesh=`` instead).

    A clip without ``times`` (evenly spaced at ``clip.fps``, as BVH gives) keeps its rate in its animation's
    ``extras.kinema_clip.fps``, so that :func:`load_gltf` gives it back evenly spaced at that rate exactly.

    A skeleton read from BVH keeps its file layout (``meta["bvh_channels"]``,
    ``meta["bvh_end_site"]``) in each joint node's ``extras.kinema_bvh``, so
    that :func:`load_gltf` restores it and ``save_bvh`` writes the original
    End Sites and channels (:mod:`kinema.io.gltf.bvh_layout`).

    Rest pose values go to the JSON as float64 decimals (exact); accessor data
    is float32 (the only float glTF has), so a re-loaded pose matches to
    float32 precision (~6e-8 relative).  The file is written atomically and
    never over the file the skeleton was loaded from.

    Raises :class:`kinema.ShapeError` for a clip whose pose is not
    ``(frames, J, k)`` (one time dimension), and :class:`kinema.SolverInputError`
    for arguments of the wrong type (a ``path`` that is not a ``str`` or ``os.PathLike``, or holds a NUL
    character) and for clip or mesh names that are not strings (load_gltf could not read them back).
    """
    spath = check_path(path)
    import pygltflib as g

    ext = os.path.splitext(spath)[1].lower()
    if ext not in (".gltf", ".glb"):
        raise SolverInputError(f"save_gltf writes .gltf or .glb, got {spath!r}")
    check_skeleton(skeleton, "save_gltf")
    clip_map: dict[str, Clip]
    if clips is None:
        clip_map = {}
    elif isinstance(clips, Clip):
        clip_map = {"clip": clips}
    elif isinstance(clips, Mapping):
        clip_map = dict(clips)
    else:
        raise SolverInputError("save_gltf: clips must be a Clip, a mapping {name: Clip} or None, "
                               f"got a {type(clips).__name__}")
    nj = skeleton.n_joints
    for name, clip in clip_map.items():
        # The animation name goes to the JSON as is: load_gltf reads only string names back.
        if not isinstance(name, str):
            raise SolverInputError(f"save_gltf: clip names must be strings, got {short_repr(name)} "
                                   f"(type {type(name).__name__})")
        if not isinstance(clip, Clip):
            raise SolverInputError(f"clips[{short_repr(name)}] is a {type(clip).__name__}, not a kinema.Clip")
        if clip.pose.n_joints != nj:
            raise ShapeError(f"clip {short_repr(name)}", f"(frames, {nj}, k) for a skeleton of {nj} joints",
                             f"{clip.pose.n_joints} joints")
        # One animation is one time line: extra batch dimensions would be written as frames of garbage.
        if len(clip.pose.batch_shape) != 1:
            raise ShapeError(f"clip {short_repr(name)}", "(frames, J, k) with one time dimension",
                             str(clip.pose.batch_shape + (nj, "k")))
    for what, rest in (("translations", skeleton.translations), ("scales", skeleton.scales)):
        _check_f32(rest, f"skeleton rest {what}", skeleton.names)
    the_mesh: SkinnedMesh | None
    if isinstance(mesh, np.bool_):
        mesh = bool(mesh)  # NumPy's True and False: the options they hold
    if mesh is None or mesh is True:
        src = skeleton.meta.get("gltf_mesh")
        the_mesh = src if isinstance(src, SkinnedMesh) else None
    elif mesh is False:
        the_mesh = None
    elif isinstance(mesh, str):
        if mesh != "bones":
            raise SolverInputError(f"mesh must be a SkinnedMesh, 'bones', None or False, got {short_repr(mesh)}")
        the_mesh = bone_mesh(skeleton)
    elif isinstance(mesh, SkinnedMesh):
        the_mesh = mesh
    else:
        raise SolverInputError(f"mesh must be a SkinnedMesh, 'bones', None or False, got a {type(mesh).__name__}")
    if the_mesh is not None:
        _check_mesh(the_mesh, skeleton)

    blob = _Blob()
    parents = skeleton.parents
    # A skeleton read from BVH keeps its file layout (End Sites, channels) in node extras: load_gltf restores it.
    extras = layout_extras(skeleton)
    nodes = []
    for j in range(nj):
        kids = [int(c) for c in skeleton.children(j)]
        nodes.append(g.Node(
            name=skeleton.names[j],
            translation=[float(x) for x in skeleton.translations[j]],
            rotation=[float(x) for x in skeleton.rotations[j]],
            scale=[float(x) for x in skeleton.scales[j]],
            children=kids or [],
            extras=extras[j] if extras is not None else {},
        ))
    roots = [j for j in range(nj) if parents[j] < 0]
    scene_nodes = list(roots)
    meshes: list[Any] = []
    skins: list[Any] = []
    materials: list[Any] = []
    if the_mesh is not None:
        m = the_mesh
        v = m.n_vertices
        attrs: dict[str, int] = {}
        attrs["POSITION"] = blob.add(m.positions, FLOAT, "VEC3", what="mesh positions", target=ARRAY_BUFFER,
                                     minmax=True)
        if m.normals is not None:
            nrm = m.normals / np.maximum(np.linalg.norm(m.normals, axis=1, keepdims=True), ZERO_QUAT_EPS)
            attrs["NORMAL"] = blob.add(nrm, FLOAT, "VEC3", what="mesh normals", target=ARRAY_BUFFER)
        if m.uvs is not None:
            attrs["TEXCOORD_0"] = blob.add(m.uvs, FLOAT, "VEC2", what="mesh uvs", target=ARRAY_BUFFER)
        k = ceil4(m.joints.shape[1]) or 4
        jn = np.zeros((v, k), dtype=np.int64)
        wt = np.zeros((v, k))
        jn[:, : m.joints.shape[1]] = m.joints
        wt[:, : m.weights.shape[1]] = m.weights
        jn[wt == 0.0] = 0  # unused influences: joint 0, weight 0
        jct = UBYTE if nj <= 256 else USHORT
        for set_i in range(k // 4):
            sl = slice(4 * set_i, 4 * set_i + 4)
            attrs[f"JOINTS_{set_i}"] = blob.add(jn[:, sl], jct, "VEC4", what="mesh joints", target=ARRAY_BUFFER)
            attrs[f"WEIGHTS_{set_i}"] = blob.add(wt[:, sl], FLOAT, "VEC4", what="mesh weights", target=ARRAY_BUFFER)
        ict = USHORT if v < 65535 else UINT
        # glTF primitives need at least one index; a mesh with no triangles has none to write.
        if m.indices.shape[0] == 0:
            raise ShapeError("mesh indices", "(T, 3) with T >= 1", tuple(m.indices.shape))
        ind = blob.add(m.indices.reshape(-1, 1), ict, "SCALAR", what="mesh indices",
                       target=ELEMENT_ARRAY_BUFFER, minmax=True)
        materials.append(g.Material.from_dict(m.material) if m.material is not None else g.Material(
            name="kinema", pbrMetallicRoughness=g.PbrMetallicRoughness(
                baseColorFactor=[0.8, 0.8, 0.8, 1.0], metallicFactor=0.0, roughnessFactor=0.8)))
        meshes.append(g.Mesh(name=m.name, primitives=[g.Primitive(attributes=g.Attributes(**attrs), indices=ind,
                                                                   material=0, mode=4)]))
        nodes.append(g.Node(name=m.name, mesh=0, skin=0))
        scene_nodes.append(len(nodes) - 1)
    # The skin is written even without a mesh: it lists the joints (so the file loads back with
    # load_gltf's default skin=0) and keeps the inverse bind matrices.
    if the_mesh is not None:
        ibm = the_mesh.inverse_bind_matrices
    else:
        kept = skeleton.meta.get("inverse_bind_matrices")
        if isinstance(kept, np.ndarray) and kept.shape == (nj, 4, 4):
            ibm = kept
        else:
            from ...fk import forward_kinematics

            world = forward_kinematics(skeleton, skeleton.rest_pose(), matrices=True).matrices
            assert world is not None
            ibm = np.asarray(np.linalg.inv(world), dtype=np.float64)
    ibm_cols = np.ascontiguousarray(np.transpose(ibm, (0, 2, 1))).reshape(nj, 16)
    ibm_acc = blob.add(ibm_cols, FLOAT, "MAT4", what="inverse bind matrices")
    skins.append(g.Skin(name="skin", joints=list(range(nj)), inverseBindMatrices=ibm_acc,
                        skeleton=roots[0] if len(roots) == 1 else None))

    animations: list[Any] = []
    for name, clip in clip_map.items():
        if clip.n_frames == 0:
            continue  # an animation needs a channel with >= 1 key: the skeleton alone is written
        ai = len(animations)
        full = clip.pose.broadcast()
        t = full.translations
        q_raw = full.rotations
        s = full.scales
        for what, arr in (("translations", t), ("rotations", q_raw), ("scales", s)):
            if not np.all(np.isfinite(arr)):
                raise FileFormatError(spath, f"animations[{ai}]", f"clip {short_repr(name)} has NaN or inf {what}")
        if np.any(s <= 0.0):
            raise FileFormatError(spath, f"animations[{ai}]", f"clip {short_repr(name)} has zero or negative scales")
        nf = clip.n_frames
        times = clip.times if clip.times is not None else np.arange(nf) / float(clip.fps)
        _check_f32(times, f"clip {short_repr(name)} frame times")
        t32 = times.astype(np.float32)
        if np.any(np.diff(t32) <= 0.0):
            raise FileFormatError(spath, f"animations[{ai}]",
                                  f"clip {short_repr(name)}: frame times do not strictly increase in float32")
        # Keep each track on one hemisphere so LINEAR (slerp) between keys takes the short way.
        q = rotation.normalize(q_raw)
        for fr in range(1, nf):
            flip = np.sum(q[fr] * q[fr - 1], axis=-1) < 0.0
            q[fr, flip] *= -1.0
        inp = blob.add(t32.reshape(-1, 1), FLOAT, "SCALAR", what=f"clip {short_repr(name)} frame times", minmax=True)
        samplers: list[Any] = []
        channels: list[Any] = []
        for j in range(nj):
            for path_name, arr, raw, rest, typ in (("translation", t, t, skeleton.translations, "VEC3"),
                                                   ("rotation", q, q_raw, skeleton.rotations, "VEC4"),
                                                   ("scale", s, s, skeleton.scales, "VEC3")):
                # Exactly the rest value on every frame (q or -q): the node's TRS already says it.
                same = np.all(raw[:, j] == rest[j], axis=-1)
                if path_name == "rotation":
                    same |= np.all(raw[:, j] == -rest[j], axis=-1)
                if bool(np.all(same)):
                    continue
                out = blob.add(arr[:, j], FLOAT, typ,
                               what=f"clip {short_repr(name)} {path_name} of joint {short_repr(skeleton.names[j])}")
                samplers.append(g.AnimationSampler(input=inp, output=out, interpolation="LINEAR"))
                channels.append(g.AnimationChannel(sampler=len(samplers) - 1,
                                                   target=g.AnimationChannelTarget(node=j, path=path_name)))
        if not channels:
            # A clip equal to the rest pose still needs one channel (animations need >= 1).
            out = blob.add(q[:, roots[0]], FLOAT, "VEC4", what=f"clip {short_repr(name)} rotation")
            samplers.append(g.AnimationSampler(input=inp, output=out, interpolation="LINEAR"))
            channels.append(g.AnimationChannel(sampler=0, target=g.AnimationChannelTarget(node=roots[0],
                                                                                          path="rotation")))
        # A clip of evenly spaced frames keeps its rate exactly: load_gltf restores it (bvh_layout).
        animations.append(g.Animation(name=name, samplers=samplers, channels=channels,
                                      extras=clip_extras(clip.fps, clip.times)))

    doc = g.GLTF2(
        asset=g.Asset(version="2.0", generator="kinema"),
        scene=0,
        scenes=[g.Scene(nodes=scene_nodes)],
        nodes=nodes,
        meshes=meshes,
        skins=skins,
        materials=materials,
        animations=animations,
        accessors=blob.accessors,
        bufferViews=blob.views,
    )
    data = bytes(blob.data)
    from .._atomic import source_files

    inputs = source_files(skeleton.meta)
    if ext == ".glb":
        if data:
            doc.buffers = [g.Buffer(byteLength=len(data))]
            doc.set_binary_blob(data)
        out_bytes = b"".join(doc.save_to_bytes())
    else:
        if data:
            uri = "data:application/octet-stream;base64," + base64.b64encode(data).decode("ascii")
            doc.buffers = [g.Buffer(byteLength=len(data), uri=uri)]
        out_bytes = doc.gltf_to_json().encode("utf-8")
    from .._atomic import atomic_write

    with atomic_write(spath, mode="wb", inputs=inputs) as f:
        f.write(out_bytes)


