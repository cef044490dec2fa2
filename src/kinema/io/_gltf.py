"""glTF 2.0 (``.gltf``) and GLB (``.glb``) in and out.

Reading is done by a strict parser of the JSON and binary chunks written for
kinema: every index, count, offset and length is checked before any byte is
read, so a broken file raises :class:`kinema.FileFormatError` naming the file
and the JSON path (``accessors[9].count``), never another exception type.
Writing builds the document with ``pygltflib`` (the ``io`` extra, imported on
first use) and goes through :func:`kinema.io._atomic.atomic_write`.

Conventions (glTF 2.0 spec): right-handed, Y up, metres; column vectors;
node transform ``T R S``; quaternions xyzw (same as kinema); accessor data
little-endian, matrices column-major.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import math
import numbers
import os
import re
import struct
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

import numpy as np
from numpy.typing import NDArray

from .. import rotation
from ..errors import FileFormatError, ShapeError, SkeletonError, SolverInputError
from ..pose import Clip, Pose
from ..skeleton import ZERO_QUAT_EPS, Skeleton
from ._read import read_regular

__all__ = ["GltfAsset", "GltfMesh", "load_gltf", "save_gltf", "bone_mesh"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

_GLB_MAGIC = b"glTF"
_GLB_HEADER = 12
_GLB_CHUNK_JSON = 0x4E4F534A
_GLB_CHUNK_BIN = 0x004E4942

#: componentType -> (little-endian numpy dtype, bytes per component)
_COMPONENTS: dict[int, tuple[str, int]] = {
    5120: ("<i1", 1),
    5121: ("<u1", 1),
    5122: ("<i2", 2),
    5123: ("<u2", 2),
    5125: ("<u4", 4),
    5126: ("<f4", 4),
}
_NCOMP = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT2": 4, "MAT3": 9, "MAT4": 16}
_FLOAT = 5126
_UBYTE, _USHORT, _UINT = 5121, 5123, 5125
_ARRAY_BUFFER, _ELEMENT_ARRAY_BUFFER = 34962, 34963
_BASE64_RE = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_PATHS = ("translation", "rotation", "scale", "weights")
_INTERPOLATIONS = ("LINEAR", "STEP", "CUBICSPLINE")

#: A node ``matrix`` counts as T*R*S when its rotation part, after dividing out
#: the column norms, is orthonormal to this (max |R^T R - I|).  Files store
#: matrices in float32-derived decimals (~1e-7); real shear is far larger.
MATRIX_SHEAR_TOL = 1e-4

#: Ancestor transforms folded into a joint must be similarities (rotation,
#: uniform scale, translation); scale components within this relative
#: tolerance count as uniform (float32 files carry scales like 1.0000001).
SIMILARITY_RTOL = 1e-6

#: Largest buffer read (``buffers[i].byteLength``): GLB's own limit (its lengths are uint32).
MAX_BUFFER_BYTES = (1 << 32) - 1

#: Decoding budget of one file: accessors (as float64/int64 arrays) and clips together may
#: take at most ``DECODE_BUDGET_FLOOR`` bytes plus ``DECODE_BUDGET_FACTOR`` times the bytes the file
#: holds (its JSON or GLB, and every buffer read).  Real data expands at most 8x (normalized bytes to
#: float64); the budget refuses, before allocating, a tiny file whose counts ask for gigabytes
#: (e.g. ``count = 2**24`` MAT4 without a bufferView: 2 GiB from 25 KB).
DECODE_BUDGET_FLOOR = 64 << 20
DECODE_BUDGET_FACTOR = 64

#: Copies of a clip's pose the loader holds at once (local, folded, reordered), for the budget.
_CLIP_COPIES = 3

#: Slack when counting resampled frames: ``ceil(t_end * fps - TIME_EPS)``, so
#: an end time on the grid up to float round-off does not add a frame.
TIME_EPS = 1e-9

#: World rest matrices with ``|det|`` below this are singular in float64 (a scale
#: product underflowed): their inverse bind matrices cannot be formed.
_MIN_DET = 1e-290

#: Bones shorter than this fraction of the skeleton's extent get no capsule in
#: :func:`bone_mesh` (a joint sitting on its parent has no direction).
BONE_MIN_LENGTH_RATIO = 1e-6


# ============================================================== data classes
@dataclass(frozen=True)
class GltfMesh:
    """Skinned triangle mesh, everything needed to draw it (bind pose, mesh space).

    * ``positions``: ``(V, 3)`` float64 vertex positions (file units, metres in glTF).
    * ``normals``: ``(V, 3)`` unit normals, or None.
    * ``uvs``: ``(V, 2)`` TEXCOORD_0, or None.
    * ``indices``: ``(T, 3)`` int64 triangle vertex indices (strips and fans
      are converted to triangle lists).
    * ``joints``: ``(V, K)`` int64 **skeleton** joint indices (already mapped
      from the file's skin order), ``K`` a multiple of 4.
    * ``weights``: ``(V, K)`` float64 skin weights (unused slots 0).
    * ``inverse_bind_matrices``: ``(J, 4, 4)`` per skeleton joint, row-major,
      column-vector convention: ``v_joint = IBM @ v_mesh``.
    * ``material``: the glTF material object (JSON dict, textures removed) or None.

    Skinning (glTF linear blend skinning):
    ``v_world = sum_k w_k T_world_joint[j_k] @ IBM[j_k] @ v``.
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

    @property
    def n_vertices(self) -> int:
        return int(self.positions.shape[0])

    def skinned_positions(self, skeleton: Skeleton, pose: Pose) -> FloatArray:
        """World vertex positions ``(*batch, V, 3)`` of ``pose`` by linear blend skinning."""
        from ..fk import forward_kinematics

        fk = forward_kinematics(skeleton, pose, matrices=True)
        assert fk.matrices is not None
        skin = fk.matrices @ self.inverse_bind_matrices  # (*b, J, 4, 4)
        per = skin[..., self.joints, :3, :]  # (*b, V, K, 3, 4)
        hom = np.concatenate([self.positions, np.ones((self.n_vertices, 1))], axis=1)
        moved = np.einsum("...vkij,vj->...vki", per, hom)
        return np.einsum("...vki,vk->...vi", moved, self.weights)


@dataclass(frozen=True)
class GltfAsset:
    """What :func:`load_gltf` returns.

    * ``skeleton``: the skin's joints in depth-first order; the transforms of
      non-joint ancestors are folded into the root(s), so FK gives glTF world
      (scene) space.  ``skeleton.meta`` holds ``"gltf_nodes"`` (node index per
      joint), ``"inverse_bind_matrices"``, ``"gltf_mesh"`` and ``"source"``.
    * ``clips``: ``{animation name: Clip}`` (see :func:`load_gltf` for times).
    * ``mesh``: the skinned mesh (:class:`GltfMesh`) or None.
    * ``inverse_bind_matrices``: ``(J, 4, 4)`` in skeleton order.
    * ``nodes``: glTF node index of each skeleton joint.
    * ``skin``: index of the skin read (None: all nodes).
    * ``notes``: what was read but not represented (channels on nodes outside
      the skeleton, morph weights, point/line primitives), with JSON paths.
    * ``document``: the parsed glTF JSON (for anything else in the file).
    """

    skeleton: Skeleton
    clips: dict[str, Clip]
    mesh: GltfMesh | None
    inverse_bind_matrices: FloatArray
    nodes: tuple[int, ...]
    skin: int | None
    path: str
    notes: tuple[str, ...]
    document: dict[str, Any]


# ==================================================================== reading
def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


def _ceil4(n: int) -> int:
    return (n + 3) & ~3


class _Doc:
    """Checked access to a parsed glTF document; every failure names its JSON path."""

    def __init__(self, path: str, doc: dict[str, Any], glb_bin: bytes | None, base_dir: str,
                 doc_bytes: int = 0) -> None:
        self.path = path
        self.doc = doc
        self.glb_bin = glb_bin
        self.base_dir = base_dir
        self._buffers: dict[int, bytes] = {}
        self._accessors: dict[tuple[int, str], NDArray[Any]] = {}
        #: Bytes still allowed for decoded arrays (grows by DECODE_BUDGET_FACTOR per buffer byte read).
        self.budget_left = DECODE_BUDGET_FLOOR + DECODE_BUDGET_FACTOR * (len(glb_bin or b"") + doc_bytes)

    def charge(self, nbytes: int, where: str, what: str) -> None:
        """Take ``nbytes`` from the decoding budget, or fail at ``where`` before anything is allocated."""
        if nbytes > self.budget_left:
            self.fail(where, f"{what} needs {nbytes:,} bytes, more than this file may decode "
                             f"({self.budget_left:,} bytes left of its budget: {DECODE_BUDGET_FLOOR:,} plus "
                             f"{DECODE_BUDGET_FACTOR} per byte of file data)")
        self.budget_left -= nbytes

    def fail(self, where: str, message: str) -> NoReturn:
        raise FileFormatError(self.path, where, message)

    # ---------------------------------------------------------- JSON values
    def top(self, key: str) -> list[Any]:
        v = self.doc.get(key, [])
        if not isinstance(v, list):
            self.fail(key, f"must be an array, got {_short(v)}")
        return v

    def item(self, key: str, i: int) -> dict[str, Any]:
        arr = self.top(key)
        if not 0 <= i < len(arr):
            self.fail(f"{key}[{i}]", f"does not exist (the file has {len(arr)} {key})")
        v = arr[i]
        if not isinstance(v, dict):
            self.fail(f"{key}[{i}]", f"must be an object, got {_short(v)}")
        return v

    def obj(self, parent: dict[str, Any], key: str, where: str, *, required: bool = True) -> dict[str, Any] | None:
        if key not in parent:
            if required:
                self.fail(where, f"required property {key!r} is missing")
            return None
        v = parent[key]
        if not isinstance(v, dict):
            self.fail(f"{where}.{key}", f"must be an object, got {_short(v)}")
        return v

    def array(self, parent: dict[str, Any], key: str, where: str, *, required: bool = True) -> list[Any]:
        if key not in parent:
            if required:
                self.fail(where, f"required property {key!r} is missing")
            return []
        v = parent[key]
        if not isinstance(v, list):
            self.fail(f"{where}.{key}", f"must be an array, got {_short(v)}")
        return v

    def integer(self, parent: dict[str, Any], key: str, where: str, *, default: int | None = None,
                lo: int = 0, hi: int | None = None) -> int:
        if key not in parent:
            if default is None:
                self.fail(where, f"required property {key!r} is missing")
            return default
        return self.int_value(parent[key], f"{where}.{key}", lo=lo, hi=hi)

    def int_value(self, v: Any, where: str, *, lo: int = 0, hi: int | None = None) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(where, f"must be an integer, got {_short(v)}")
        if v < lo or (hi is not None and v > hi):
            rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
            self.fail(where, f"is {v}, must be {rng}")
        return v

    def ref(self, parent: dict[str, Any], key: str, where: str, collection: str, *,
            required: bool = True) -> int | None:
        """An index into the top-level array ``collection``."""
        if key not in parent:
            if required:
                self.fail(where, f"required property {key!r} is missing")
            return None
        return self.ref_value(parent[key], f"{where}.{key}", collection)

    def ref_value(self, v: Any, where: str, collection: str) -> int:
        n = len(self.top(collection))
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(where, f"must be an index into {collection}, got {_short(v)}")
        if not 0 <= v < n:
            self.fail(where, f"refers to {collection}[{v}] but the file has {n} {collection}")
        return v

    def numbers(self, parent: dict[str, Any], key: str, where: str, n: int, default: Sequence[float]) -> FloatArray:
        if key not in parent:
            return np.array(default, dtype=np.float64)
        v = parent[key]
        w = f"{where}.{key}"
        if not isinstance(v, list) or len(v) != n:
            self.fail(w, f"must be an array of {n} numbers, got {_short(v)}")
        for x in v:
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
                self.fail(w, f"must hold finite numbers, got {_short(x)}")
        return np.array(v, dtype=np.float64)

    def string(self, parent: dict[str, Any], key: str, where: str) -> str | None:
        v = parent.get(key)
        if v is not None and not isinstance(v, str):
            self.fail(f"{where}.{key}", f"must be a string, got {_short(v)}")
        return v

    # ------------------------------------------------------------- binary
    def buffer(self, i: int) -> bytes:
        if i in self._buffers:
            return self._buffers[i]
        w = f"buffers[{i}]"
        b = self.item("buffers", i)
        length = self.integer(b, "byteLength", w, lo=1, hi=MAX_BUFFER_BYTES)
        uri = b.get("uri")
        if uri is None:
            if i != 0 or self.glb_bin is None:
                self.fail(w, "has no uri and there is no GLB binary chunk for it")
            data = self.glb_bin
        elif not isinstance(uri, str):
            self.fail(f"{w}.uri", f"must be a string, got {_short(uri)}")
        elif uri.startswith("data:"):
            data = self._data_uri(uri, length, f"{w}.uri")
        else:
            file = self.resource_path(uri, f"{w}.uri")
            try:
                data = read_regular(file, report_path=self.path, where=f"{w}.uri", size=length)
            except OSError as exc:
                self.fail(f"{w}.uri", f"cannot read {file!r}: {exc.strerror or exc}")
        if len(data) < length:
            self.fail(f"{w}.byteLength", f"is {length} but the buffer data has only {len(data)} bytes")
        data = data[:length]
        self._buffers[i] = data
        self.budget_left += DECODE_BUDGET_FACTOR * length
        return data

    def _data_uri(self, uri: str, length: int, where: str) -> bytes:
        """The bytes of a base64 ``data:`` URI, checked to hold at least ``length`` bytes before decoding."""
        head, sep, payload = uri.partition(",")
        if not sep or not head.endswith(";base64"):
            self.fail(where, "only base64 data URIs are supported (data:...;base64,...)")
        if len(payload) % 4 or not _BASE64_RE.fullmatch(payload):
            self.fail(where, "invalid base64 data (characters outside the base64 alphabet, or bad padding)")
        most = len(payload) // 4 * 3  # base64 holds 3 bytes per 4 characters
        if most < length:
            self.fail(where.removesuffix(".uri") + ".byteLength",
                      f"is {length} but the data URI holds at most {most} bytes")
        # Decode only what byteLength asks for (whole 4-character groups), so a long payload costs nothing extra.
        keep = -(-length // 3) * 4
        try:
            return base64.b64decode(payload[:keep], validate=True)
        except (binascii.Error, ValueError) as exc:
            self.fail(where, f"invalid base64 data ({exc})")

    def resource_path(self, uri: str, where: str) -> str:
        """The file a relative ``uri`` names, confined to the asset's own folder.

        The URI is percent-decoded, joined to the folder and resolved
        (symlinks, ``..``); the result must stay inside the folder's resolved
        path.  Schemes, absolute paths, queries, fragments, NUL bytes and
        undecodable escapes are refused: each a FileFormatError at ``where``.
        """
        if "\0" in uri:
            self.fail(where, "holds a NUL byte")
        parsed = urllib.parse.urlsplit(uri)
        if parsed.scheme or parsed.netloc or os.path.isabs(uri):
            self.fail(where, f"only relative file URIs are supported, got {_short(uri)}")
        if parsed.query or parsed.fragment:
            self.fail(where, f"a file URI with a query or fragment is not supported, got {_short(uri)}")
        try:
            rel = urllib.parse.unquote(parsed.path, errors="strict")
            os.fsencode(rel)
        except (UnicodeDecodeError, UnicodeEncodeError):
            self.fail(where, f"is not a valid file name after percent-decoding: {_short(uri)}")
        if "\0" in rel:
            self.fail(where, "holds a NUL byte (after percent-decoding)")
        if not rel or os.path.isabs(rel):
            self.fail(where, f"must name a file relative to the asset's folder, got {_short(uri)}")
        folder = os.path.realpath(self.base_dir)
        file = os.path.realpath(os.path.join(folder, rel))
        if os.path.commonpath([folder, file]) != folder:
            self.fail(where, f"{_short(uri)} resolves outside the asset's folder; only files in the folder "
                             "(or below it) are read")
        return file

    def buffer_view(self, i: int) -> tuple[memoryview, int]:
        """Bytes of bufferView ``i`` and its byteStride (0 when absent)."""
        w = f"bufferViews[{i}]"
        bv = self.item("bufferViews", i)
        buf = self.ref(bv, "buffer", w, "buffers")
        assert buf is not None
        off = self.integer(bv, "byteOffset", w, default=0)
        length = self.integer(bv, "byteLength", w, lo=1)
        stride = self.integer(bv, "byteStride", w, default=0, lo=4, hi=252) if "byteStride" in bv else 0
        if stride % 4:
            self.fail(f"{w}.byteStride", f"is {stride}, must be a multiple of 4")
        data = self.buffer(buf)
        if off + length > len(data):
            self.fail(f"{w}.byteLength", f"byteOffset {off} + byteLength {length} exceeds buffers[{buf}] "
                                         f"({len(data)} bytes)")
        return memoryview(data)[off:off + length], stride

    def _read(self, where: str, bvi: int, off: int, count: int, ct: int, typ: str, *, packed: bool) -> NDArray[Any]:
        """``count`` elements of ``typ``/``ct`` from bufferView ``bvi`` at ``off`` as ``(count, ncomp)``."""
        dt, size = _COMPONENTS[ct]
        ncomp = _NCOMP[typ]
        if typ.startswith("MAT"):  # each column starts on a 4-byte boundary
            rows = int(typ[3])
            col_bytes = _ceil4(rows * size)
            elem = col_bytes * rows
        else:
            rows = 1
            col_bytes = elem = ncomp * size
        view, stride = self.buffer_view(bvi)
        if off % size:
            self.fail(f"{where}.byteOffset", f"is {off}, not a multiple of the component size {size}")
        stride = elem if (packed or stride == 0) else stride
        if stride < elem:
            self.fail(f"bufferViews[{bvi}].byteStride", f"is {stride}, smaller than one element ({elem} bytes) "
                                                        f"of {where}")
        need = off + stride * (count - 1) + elem
        if need > len(view):
            self.fail(f"{where}.count", f"{count} elements of {elem} bytes (stride {stride}) from byte {off} need "
                                        f"{need} bytes but bufferViews[{bvi}] has {len(view)}")
        u8 = np.frombuffer(view, dtype=np.uint8)
        raw = np.lib.stride_tricks.as_strided(u8[off:], shape=(count, elem), strides=(stride, 1), writeable=False)
        if typ.startswith("MAT") and col_bytes != rows * size:
            raw = raw.reshape(count, rows, col_bytes)[:, :, : rows * size].reshape(count, rows * rows * size)
        return np.ascontiguousarray(raw).view(dt).reshape(count, ncomp)

    def accessor(self, i: int, ref: str, types: tuple[str, ...], cts: tuple[int, ...],
                 kind: Literal["float", "int"]) -> NDArray[Any]:
        """Accessor ``i`` as ``(count, ncomp)`` float64 (``kind="float"``, normalized
        integers converted per the spec) or int64 (``kind="int"``)."""
        key = (i, kind)
        if key in self._accessors:
            arr = self._accessors[key]
        else:
            arr = self._accessor(i, kind)
            self._accessors[key] = arr
        acc = self.item("accessors", i)
        w = f"accessors[{i}]"
        if acc["type"] not in types:
            self.fail(f"{w}.type", f"is {acc['type']} but {ref} needs {' or '.join(types)}")
        if acc["componentType"] not in cts:
            self.fail(f"{w}.componentType", f"is {acc['componentType']} but {ref} needs one of {list(cts)}")
        if kind == "float" and acc["componentType"] != _FLOAT and not acc.get("normalized", False):
            self.fail(f"{w}.normalized", f"integer data used by {ref} must be normalized")
        return arr

    def _accessor(self, i: int, kind: str) -> NDArray[Any]:
        w = f"accessors[{i}]"
        acc = self.item("accessors", i)
        ct = self.integer(acc, "componentType", w)
        if ct not in _COMPONENTS:
            self.fail(f"{w}.componentType", f"is {ct}, not one of {sorted(_COMPONENTS)}")
        typ = acc.get("type")
        if not isinstance(typ, str) or typ not in _NCOMP:
            self.fail(f"{w}.type", f"is {_short(typ)}, not one of {list(_NCOMP)}")
        count = self.integer(acc, "count", w, lo=1)
        normalized = acc.get("normalized", False)
        if not isinstance(normalized, bool):
            self.fail(f"{w}.normalized", f"must be a boolean, got {_short(normalized)}")
        if normalized and ct in (_FLOAT, _UINT):
            self.fail(f"{w}.normalized", "only byte and short components can be normalized")
        if kind == "int" and normalized:
            self.fail(f"{w}.normalized", "integer indices must not be normalized")
        dt, size = _COMPONENTS[ct]
        ncomp = _NCOMP[typ]
        off = self.integer(acc, "byteOffset", w, default=0)
        bvi = self.ref(acc, "bufferView", w, "bufferViews", required=False)
        if bvi is None:
            # No bufferView: all zeros (the spec), possibly patched by sparse below.  Charged for the
            # zeros and the float64 / int64 result before either exists.
            self.charge(count * ncomp * (size + 8), f"{w}.count", f"{count} {typ} elements without a bufferView")
            out: NDArray[Any] = np.zeros((count, ncomp), dtype=dt)
        else:
            # _read checks count against the bufferView before copying at most the view's bytes;
            # the float64 / int64 result is charged before it is made.
            out = self._read(w, bvi, off, count, ct, typ, packed=False)
            self.charge(count * ncomp * 8, f"{w}.count", f"{count} {typ} elements")
        sp = self.obj(acc, "sparse", w, required=False)
        if sp is not None:
            ws = f"{w}.sparse"
            scount = self.integer(sp, "count", ws, lo=1, hi=count)
            ind = self.obj(sp, "indices", ws)
            val = self.obj(sp, "values", ws)
            assert ind is not None and val is not None
            ict = self.integer(ind, "componentType", f"{ws}.indices")
            if ict not in (_UBYTE, _USHORT, _UINT):
                self.fail(f"{ws}.indices.componentType", f"is {ict}, must be 5121, 5123 or 5125")
            ibv = self.ref(ind, "bufferView", f"{ws}.indices", "bufferViews")
            vbv = self.ref(val, "bufferView", f"{ws}.values", "bufferViews")
            assert ibv is not None and vbv is not None
            idx = self._read(f"{ws}.indices", ibv, self.integer(ind, "byteOffset", f"{ws}.indices", default=0),
                             scount, ict, "SCALAR", packed=True)[:, 0].astype(np.int64)
            if np.any(np.diff(idx) <= 0) or idx[-1] >= count:
                self.fail(f"{ws}.indices", f"must strictly increase and stay below count {count}")
            vals = self._read(f"{ws}.values", vbv, self.integer(val, "byteOffset", f"{ws}.values", default=0),
                              scount, ct, typ, packed=True)
            out = out.copy()
            out[idx] = vals
        if kind == "int":
            return out.astype(np.int64)
        if ct == _FLOAT:
            with np.errstate(invalid="ignore"):  # signalling NaN bit patterns: reported just below
                res = out.astype(np.float64)
            if not np.all(np.isfinite(res)):
                bad = tuple(int(k) for k in np.argwhere(~np.isfinite(res))[0])
                self.fail(w, f"holds NaN or infinity (element {bad[0]}, component {bad[1]})")
            return res
        # Normalized integers (glTF 2.0 spec, "Animations" / "Meshes"):
        # unsigned c / (2^n - 1); signed max(c / (2^(n-1) - 1), -1).
        info = np.iinfo(np.dtype(dt))
        res = out.astype(np.float64) / float(info.max)
        return np.maximum(res, -1.0)


def _parse_container(path: str, data: bytes) -> tuple[dict[str, Any], bytes | None]:
    """JSON document and GLB binary chunk (None for .gltf) of a file's bytes."""
    glb_bin: bytes | None = None
    where = None
    if data[:4] == _GLB_MAGIC:
        if len(data) < _GLB_HEADER:
            raise FileFormatError(path, "GLB header", f"file has {len(data)} bytes, a GLB header needs 12")
        _, version, length = struct.unpack_from("<4sII", data, 0)
        if version != 2:
            raise FileFormatError(path, "GLB header", f"version {version}, only glTF 2.0 GLB is supported")
        if length > len(data):
            raise FileFormatError(path, "GLB header", f"declares {length} bytes but the file has {len(data)} "
                                                      "(truncated?)")
        pos = _GLB_HEADER
        chunks: list[tuple[int, bytes]] = []
        while pos + 8 <= length:
            clen, ctype = struct.unpack_from("<II", data, pos)
            if pos + 8 + clen > length:
                raise FileFormatError(path, f"GLB chunk {len(chunks)}", f"length {clen} runs past the end "
                                                                         f"of the file ({length} bytes)")
            chunks.append((ctype, data[pos + 8: pos + 8 + clen]))
            pos += 8 + _ceil4(clen)
        if not chunks or chunks[0][0] != _GLB_CHUNK_JSON:
            raise FileFormatError(path, "GLB chunk 0", "the first chunk must be JSON")
        for ctype, payload in chunks[1:]:
            if ctype == _GLB_CHUNK_BIN:
                glb_bin = payload
                break
        text_bytes = chunks[0][1]
        where = "GLB JSON chunk"
    else:
        text_bytes = data
    try:
        text = text_bytes.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad_line = text_bytes.count(b"\n", 0, exc.start) + 1
        at: int | str = bad_line if where is None else f"{where} line {bad_line}"
        raise FileFormatError(path, at, f"not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    # Errors about the document as a whole (no line to give) are located here.
    doc_where = where or "JSON document"

    def _no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    try:
        doc = json.loads(text, parse_constant=_no_constants)
    except json.JSONDecodeError as exc:
        line: int | str = exc.lineno if where is None else f"{where} line {exc.lineno}"
        raise FileFormatError(path, line, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:
        raise FileFormatError(path, doc_where, f"invalid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise FileFormatError(path, doc_where, "a glTF document must be a JSON object")
    asset = doc.get("asset")
    if not isinstance(asset, dict) or not isinstance(asset.get("version"), str):
        raise FileFormatError(path, "asset.version", "required (a glTF file has asset.version)")
    if not asset["version"].startswith("2."):
        raise FileFormatError(path, "asset.version", f"is {_short(asset['version'])}; only glTF 2.x is supported")
    return doc, glb_bin


def _decompose(r: _Doc, m: FloatArray, where: str) -> tuple[FloatArray, FloatArray, FloatArray]:
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


def _trs_matrix(t: FloatArray, q: FloatArray, s: FloatArray) -> FloatArray:
    m = np.eye(4)
    m[:3, :3] = rotation.as_matrix(q) * s
    m[:3, 3] = t
    return m


def _node_local(r: _Doc, n: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Local ``(t, q, s)`` of node ``n`` from its matrix or TRS."""
    w = f"nodes[{n}]"
    node = r.item("nodes", n)
    if "matrix" in node:
        if any(k in node for k in ("translation", "rotation", "scale")):
            r.fail(w, "has both matrix and translation/rotation/scale")
        m = r.numbers(node, "matrix", w, 16, ()).reshape(4, 4).T  # column-major in the file
        return _decompose(r, m, f"{w}.matrix")
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


def _hierarchy(r: _Doc) -> list[int]:
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


def _is_similarity(m: FloatArray) -> bool:
    lin = m[:3, :3]
    s = np.linalg.norm(lin, axis=0)
    if np.any(s <= 0.0) or np.linalg.det(lin) < 0.0:
        return False
    if np.max(np.abs(s - s.mean())) > SIMILARITY_RTOL * s.mean():
        return False
    rot = lin / s
    return bool(np.max(np.abs(rot.T @ rot - np.eye(3))) <= MATRIX_SHEAR_TOL)


def _unique_names(r: _Doc, members: list[int]) -> list[str]:
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


def _fold(prefix_t: FloatArray, prefix_q: FloatArray, prefix_s: FloatArray,
          t: FloatArray, q: FloatArray, s: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Compose similarity prefixes ``P_j = (t_p, q_p, s_p)`` (per joint) with local TRS ``(..., J, k)``.

    ``P (T R S) = T(t_p + s_p rotate(q_p, t)) R(q_p q) S(s_p s)``: exact because
    ``s_p`` is uniform.
    """
    t2 = prefix_t + prefix_s[:, None] * rotation.rotate(prefix_q, t)
    q2 = rotation.multiply(prefix_q, q)
    s2 = prefix_s[:, None] * s
    return t2, q2, s2


def _sample(times: FloatArray, values: FloatArray, interp: str, query: FloatArray, is_rotation: bool) -> FloatArray:
    """Evaluate one sampler at ``query`` times ``(F,)``; ``values`` is ``(K, n)`` (``(3K, n)`` for CUBICSPLINE).

    Before the first key and after the last the end values hold (glTF spec).
    LINEAR: lerp, slerp for rotations.  STEP: the key at or before t.
    CUBICSPLINE: ``p = (2u^3-3u^2+1) v_k + (u^3-2u^2+u) d b_k + (-2u^3+3u^2) v_k1 + (u^3-u^2) d a_k1``
    with ``d = t_k1 - t_k``, in-tangent ``a``, out-tangent ``b``; rotations normalised.
    """
    k = times.shape[0]
    i0 = np.clip(np.searchsorted(times, query, side="right") - 1, 0, k - 1)
    i1 = np.minimum(i0 + 1, k - 1)
    d = times[i1] - times[i0]
    # At or past the last key (and before the first) i0 == i1 or u clips to 0: the end value holds.
    safe_d = np.where(d > 0.0, d, 1.0)
    u = np.where(d > 0.0, np.clip((query - times[i0]) / safe_d, 0.0, 1.0), 0.0)
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


def load_gltf(path: str | os.PathLike[str], *, skin: int | str | None = 0, fps: float | None = None) -> GltfAsset:
    """Read a glTF 2.0 ``.gltf`` or ``.glb`` file: skeleton of a skin, its mesh, and all animations.

    * ``skin``: index or name of the skin to read (default the first); None
      makes every node a joint, and so does the default on a file without
      a skin (e.g. a rigid rig; ``notes`` says so).
    * ``fps``: None keeps the key times: each clip's frames are the union of
      its channels' key times (``clip.times``, seconds) and ``clip.fps`` is
      the mean key rate ``(frames - 1) / (times[-1] - times[0])`` (1.0 for a
      single key).  A number resamples every clip at ``k / fps`` for
      ``k = 0 .. ceil(t_end * fps)`` (``clip.times`` is None): frame 0 is at
      the animation's t = 0 and the last frame covers the last key.

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
    allocated.

    Raises :class:`kinema.FileFormatError` (file and JSON path) for anything
    malformed or refused (a FIFO or device given as the file is refused too),
    :class:`FileNotFoundError` for a missing file and
    :class:`kinema.SolverInputError` for a bad ``fps``.
    """
    if fps is not None and (isinstance(fps, bool) or not isinstance(fps, numbers.Real)
                            or not (math.isfinite(fps) and fps > 0)):
        raise SolverInputError(f"load_gltf: fps must be a positive finite number or None, got {fps!r}")
    spath = os.fspath(path)
    data = read_regular(spath)
    doc, glb_bin = _parse_container(spath, data)
    r = _Doc(spath, doc, glb_bin, os.path.dirname(os.path.abspath(spath)), doc_bytes=len(data))
    # Extreme values (1e308) may overflow on the way; every result is checked for finiteness instead.
    with np.errstate(all="ignore"):
        return _load(r, skin, fps)


def _load(r: _Doc, skin: int | str | None, fps: float | None) -> GltfAsset:
    notes: list[str] = []
    parent = _hierarchy(r)
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
                r.fail("skins", f"no skin named {skin!r} (skins: {skin_names})")
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
            arr = r.accessor(ibm_acc, f"{ws}.inverseBindMatrices", ("MAT4",), (_FLOAT,), "float")
            if arr.shape[0] < len(joints):
                r.fail(f"accessors[{ibm_acc}].count", f"is {arr.shape[0]}, fewer than the {len(joints)} joints "
                                                       f"of {ws}")
            ibm_skin = arr[: len(joints)].reshape(-1, 4, 4).transpose(0, 2, 1)

    # Skeleton members: the joints, plus non-joint nodes whose folded transform
    # between two members (or above a root) would not be a similarity.
    local_cache: dict[int, tuple[FloatArray, FloatArray, FloatArray]] = {}

    def local(n: int) -> tuple[FloatArray, FloatArray, FloatArray]:
        if n not in local_cache:
            local_cache[n] = _node_local(r, n)
        return local_cache[n]

    member_set = set(joints)
    extra: list[int] = []

    def segment(n: int) -> list[int]:
        """Non-member ancestors of member ``n`` up to the next member (nearest first)."""
        out = []
        p = parent[n]
        while p != -1 and p not in member_set:
            out.append(p)
            p = parent[p]
        return out

    def composite(path_nodes: list[int]) -> FloatArray:
        m = np.eye(4)
        for p in path_nodes:  # nearest first: M = L(top) ... L(nearest)
            m = _trs_matrix(*local(p)) @ m
        return m

    changed = True
    while changed:
        changed = False
        for n in list(joints) + extra:
            seg = segment(n)
            if seg and not _is_similarity(composite(seg)):
                for p in seg:
                    member_set.add(p)
                    extra.append(p)
                changed = True
                break
    members = list(joints) + sorted(extra)
    pos = {n: k for k, n in enumerate(members)}
    mparents = []
    for n in members:
        p = parent[n]
        while p != -1 and p not in member_set:
            p = parent[p]
        mparents.append(pos[p] if p != -1 else -1)
    nm = len(members)
    pre_t = np.zeros((nm, 3))
    pre_q = np.tile([0.0, 0.0, 0.0, 1.0], (nm, 1))
    pre_s = np.ones(nm)
    for k, n in enumerate(members):
        seg = segment(n)
        if seg:
            m = composite(seg)
            pt, pq, ps = _decompose(r, m, f"nodes[{seg[0]}] (and its ancestors)")
            pre_t[k], pre_q[k], pre_s[k] = pt, pq, float(np.mean(ps))
    rest_t = np.array([local(n)[0] for n in members])
    rest_q = np.array([local(n)[1] for n in members])
    rest_s = np.array([local(n)[2] for n in members])
    ft, fq, fs = _fold(pre_t, pre_q, pre_s, rest_t, rest_q, rest_s)
    names = _unique_names(r, members)
    try:
        tmp, order = Skeleton.from_unordered(names, mparents, ft, fq, fs)
    except SkeletonError as exc:  # e.g. a scale that underflows to 0 or a translation that overflows
        r.fail("nodes", f"the skin's node transforms do not make a valid skeleton: {exc}")
    new_of_old = np.empty(nm, dtype=np.int64)
    new_of_old[order] = np.arange(nm)

    from ..fk import forward_kinematics

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
    meta = {
        "format": "gltf",
        "source": r.path,
        "gltf_nodes": node_of_joint,
        "gltf_skin": skin_index,
        "inverse_bind_matrices": ibm,
        "gltf_mesh": mesh,
    }
    skeleton = Skeleton(tmp.names, tmp.parents, tmp.translations, tmp.rotations, tmp.scales, meta=meta)

    clips = _read_animations(r, members, order, (pre_t, pre_q, pre_s), (rest_t, rest_q, rest_s), fps, notes)
    return GltfAsset(skeleton=skeleton, clips=clips, mesh=mesh, inverse_bind_matrices=ibm, nodes=node_of_joint,
                     skin=skin_index, path=r.path, notes=tuple(notes), document=r.doc)


def _strip_textures(obj: Any) -> Any:
    """A material without texture references (a re-saved file carries no images)."""
    if isinstance(obj, dict):
        return {k: _strip_textures(v) for k, v in obj.items() if not k.endswith("Texture") and k != "extensions"}
    if isinstance(obj, list):
        return [_strip_textures(v) for v in obj]
    return obj


def _read_mesh(r: _Doc, skin_index: int, n_skin_joints: int, new_of_old: IntArray, ibm: FloatArray,
               notes: list[str]) -> GltfMesh | None:
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
            p = r.accessor(pa, f"{wa}.POSITION", ("VEC3",), (_FLOAT,), "float")
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

            nrm = attr("NORMAL", ("VEC3",), (_FLOAT,), "float")
            uv = attr("TEXCOORD_0", ("VEC2",), (_FLOAT, _UBYTE, _USHORT), "float")
            js: list[IntArray] = []
            ws: list[FloatArray] = []
            k = 0
            while f"JOINTS_{k}" in attrs or f"WEIGHTS_{k}" in attrs:
                j = attr(f"JOINTS_{k}", ("VEC4",), (_UBYTE, _USHORT), "int")
                wt = attr(f"WEIGHTS_{k}", ("VEC4",), (_FLOAT, _UBYTE, _USHORT), "float")
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
                idx = r.accessor(ia, f"{w}.indices", ("SCALAR",), (_UBYTE, _USHORT, _UINT), "int")[:, 0]
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
            pos_l.append(p)
            nrm_l.append(nrm)
            uv_l.append(uv)
            tri_l.append(tris + base)
            jnt_l.append(np.concatenate(js, axis=1))
            wgt_l.append(np.concatenate(ws, axis=1))
            base += nv
            if material is None and "material" in prim:
                mat_i = r.ref(prim, "material", w, "materials")
                assert mat_i is not None
                material = _strip_textures(copy.deepcopy(r.item("materials", mat_i)))
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
    return GltfMesh(
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


def _read_animations(r: _Doc, members: list[int], order: IntArray,
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
                r.fail(f"{wc}.target.path", f"is {_short(path)}, not one of {list(_PATHS)}")
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
                r.fail(f"{ws}.interpolation", f"is {_short(interp)}, not one of {list(_INTERPOLATIONS)}")
            ia = r.ref(sampler, "input", ws, "accessors")
            oa = r.ref(sampler, "output", ws, "accessors")
            assert ia is not None and oa is not None
            times = r.accessor(ia, f"{ws}.input", ("SCALAR",), (_FLOAT,), "float")[:, 0]
            if np.any(np.diff(times) <= 0.0):
                r.fail(f"accessors[{ia}]", f"animation key times ({ws}.input) must strictly increase")
            if path == "weights":
                notes.append(f"{wc}: morph target weights are not represented; ignored")
                continue
            if path == "rotation":
                vals = r.accessor(oa, f"{ws}.output", ("VEC4",), (_FLOAT, 5120, _UBYTE, 5122, _USHORT), "float")
            else:
                vals = r.accessor(oa, f"{ws}.output", ("VEC3",), (_FLOAT,), "float")
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
        if fps is None:
            query = np.unique(np.concatenate([t for t, _, _ in tracks.values()]))
            n_frames = int(query.size)
            what = f"{n_frames} key times for {nm} joints"
        else:
            span = t_end * fps
            if not math.isfinite(span):
                r.fail(wa, f"resampling {t_end:g} s at {fps:g} fps gives too many frames")
            n_frames = max(int(math.ceil(span - TIME_EPS)), 0) + 1
            what = f"resampling {t_end:g} s at {fps:g} fps ({n_frames} frames, {nm} joints)"
        # Local, folded and reordered poses: three copies of frames x joints x 10 float64.
        r.charge(n_frames * nm * 10 * 8 * _CLIP_COPIES, wa, what)
        if fps is not None:
            query = np.arange(n_frames) / float(fps)
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
        ft, fq, fs = _fold(*prefix, lt, lq, ls)
        pose = Pose(ft[:, order], fq[:, order], fs[:, order])
        if fps is None:
            span = float(query[-1] - query[0])
            mean_fps = (nf - 1) / span if nf > 1 else 1.0
            clips[name] = Clip(pose, mean_fps, times=query)
        else:
            clips[name] = Clip(pose, float(fps))
    return clips


# ==================================================================== writing
class _Blob:
    """Binary buffer under construction: one bufferView per accessor, 4-byte aligned."""

    def __init__(self) -> None:
        import pygltflib

        self.g = pygltflib
        self.data = bytearray()
        self.views: list[Any] = []
        self.accessors: list[Any] = []

    def add(self, arr: NDArray[Any], ct: int, typ: str, *, target: int | None = None,
            minmax: bool = False, normalized: bool = False) -> int:
        dt, _ = _COMPONENTS[ct]
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
            cast = float if ct == _FLOAT else int
            acc.min = [cast(x) for x in flat.min(axis=0)]
            acc.max = [cast(x) for x in flat.max(axis=0)]
        self.accessors.append(acc)
        return len(self.accessors) - 1


def _check_mesh(mesh: GltfMesh, skeleton: Skeleton) -> None:
    nj = skeleton.n_joints
    v = mesh.positions.shape[0] if mesh.positions.ndim == 2 else -1
    if mesh.positions.shape != (v, 3) or v < 1:
        raise ShapeError("mesh positions", "(V, 3) with V >= 1", tuple(mesh.positions.shape))
    if mesh.indices.ndim != 2 or mesh.indices.shape[1] != 3:
        raise ShapeError("mesh indices", "(T, 3)", tuple(mesh.indices.shape))
    if mesh.joints.shape != mesh.weights.shape or mesh.joints.shape[0] != v or mesh.joints.ndim != 2:
        raise ShapeError("mesh joints/weights", f"({v}, K) both", f"{mesh.joints.shape} and {mesh.weights.shape}")
    if mesh.inverse_bind_matrices.shape != (nj, 4, 4):
        raise ShapeError("mesh inverse_bind_matrices", f"({nj}, 4, 4)", tuple(mesh.inverse_bind_matrices.shape))
    for what, a, n in (("normals", mesh.normals, 3), ("uvs", mesh.uvs, 2)):
        if a is not None and a.shape != (v, n):
            raise ShapeError(f"mesh {what}", f"({v}, {n})", tuple(a.shape))
    if mesh.joints.size and (mesh.joints.min() < 0 or mesh.joints.max() >= nj):
        raise ShapeError("mesh joints", f"indices in [0, {nj})", f"range [{mesh.joints.min()}, {mesh.joints.max()}]")
    if mesh.indices.size and (mesh.indices.min() < 0 or mesh.indices.max() >= v):
        raise ShapeError("mesh indices", f"vertex indices in [0, {v})",
                         f"range [{mesh.indices.min()}, {mesh.indices.max()}]")


def save_gltf(
    path: str | os.PathLike[str],
    skeleton: Skeleton,
    clips: Mapping[str, Clip] | Clip | None = None,
    mesh: GltfMesh | Literal["bones"] | bool | None = None,
) -> None:
    """Write ``skeleton``, ``clips`` and a skinned mesh as glTF 2.0 (``.gltf``: one JSON file,
    buffer embedded as base64) or GLB (``.glb``), chosen by the extension.

    * ``clips``: ``{name: Clip}`` (a single Clip is named ``"clip"``); each
      becomes one animation, LINEAR, with one key per frame at ``clip.times``
      or ``k / clip.fps``.  Channels whose values equal the rest pose on every
      frame are left out (the rest pose is the node's TRS).
    * ``mesh``: None (default) keeps the mesh and skin the skeleton was loaded
      with (``skeleton.meta["gltf_mesh"]``), if any; a :class:`GltfMesh`
      writes that mesh; ``"bones"`` writes :func:`bone_mesh` (capsules along
      the bones, so a BVH clip opens in any glTF viewer); False writes no mesh.

    Rest pose values go to the JSON as float64 decimals (exact); accessor data
    is float32 (the only float glTF has), so a re-loaded pose matches to
    float32 precision (~6e-8 relative).  The file is written atomically and
    never over the file the skeleton was loaded from.
    """
    import pygltflib as g

    spath = os.fspath(path)
    ext = os.path.splitext(spath)[1].lower()
    if ext not in (".gltf", ".glb"):
        raise ValueError(f"save_gltf writes .gltf or .glb, got {spath!r}")
    clip_map: dict[str, Clip]
    if clips is None:
        clip_map = {}
    elif isinstance(clips, Clip):
        clip_map = {"clip": clips}
    else:
        clip_map = dict(clips)
    nj = skeleton.n_joints
    for name, clip in clip_map.items():
        if not isinstance(clip, Clip):
            raise TypeError(f"clips[{name!r}] is a {type(clip).__name__}, not a kinema.Clip")
        if clip.pose.n_joints != nj:
            raise ShapeError(f"clip {name!r}", f"(frames, {nj}, k) for a skeleton of {nj} joints",
                             f"{clip.pose.n_joints} joints")
    the_mesh: GltfMesh | None
    if mesh is None or mesh is True:
        src = skeleton.meta.get("gltf_mesh")
        the_mesh = src if isinstance(src, GltfMesh) else None
    elif mesh is False:
        the_mesh = None
    elif isinstance(mesh, str):
        if mesh != "bones":
            raise ValueError(f"mesh must be a GltfMesh, 'bones', None or False, got {mesh!r}")
        the_mesh = bone_mesh(skeleton)
    elif isinstance(mesh, GltfMesh):
        the_mesh = mesh
    else:
        raise TypeError(f"mesh must be a GltfMesh, 'bones', None or False, got {type(mesh).__name__}")
    if the_mesh is not None:
        _check_mesh(the_mesh, skeleton)

    blob = _Blob()
    parents = skeleton.parents
    nodes = []
    for j in range(nj):
        kids = [int(c) for c in skeleton.children(j)]
        nodes.append(g.Node(
            name=skeleton.names[j],
            translation=[float(x) for x in skeleton.translations[j]],
            rotation=[float(x) for x in skeleton.rotations[j]],
            scale=[float(x) for x in skeleton.scales[j]],
            children=kids or [],
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
        attrs["POSITION"] = blob.add(m.positions, _FLOAT, "VEC3", target=_ARRAY_BUFFER, minmax=True)
        if m.normals is not None:
            nrm = m.normals / np.maximum(np.linalg.norm(m.normals, axis=1, keepdims=True), ZERO_QUAT_EPS)
            attrs["NORMAL"] = blob.add(nrm, _FLOAT, "VEC3", target=_ARRAY_BUFFER)
        if m.uvs is not None:
            attrs["TEXCOORD_0"] = blob.add(m.uvs, _FLOAT, "VEC2", target=_ARRAY_BUFFER)
        k = _ceil4(m.joints.shape[1]) or 4
        jn = np.zeros((v, k), dtype=np.int64)
        wt = np.zeros((v, k))
        jn[:, : m.joints.shape[1]] = m.joints
        wt[:, : m.weights.shape[1]] = m.weights
        jn[wt == 0.0] = 0  # unused influences: joint 0, weight 0
        jct = _UBYTE if nj <= 256 else _USHORT
        for set_i in range(k // 4):
            sl = slice(4 * set_i, 4 * set_i + 4)
            attrs[f"JOINTS_{set_i}"] = blob.add(jn[:, sl], jct, "VEC4", target=_ARRAY_BUFFER)
            attrs[f"WEIGHTS_{set_i}"] = blob.add(wt[:, sl], _FLOAT, "VEC4", target=_ARRAY_BUFFER)
        ict = _USHORT if v < 65535 else _UINT
        # glTF primitives need at least one index; a mesh with no triangles has none to write.
        if m.indices.shape[0] == 0:
            raise ShapeError("mesh indices", "(T, 3) with T >= 1", tuple(m.indices.shape))
        ind = blob.add(m.indices.reshape(-1, 1), ict, "SCALAR", target=_ELEMENT_ARRAY_BUFFER, minmax=True)
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
            from ..fk import forward_kinematics

            world = forward_kinematics(skeleton, skeleton.rest_pose(), matrices=True).matrices
            assert world is not None
            ibm = np.asarray(np.linalg.inv(world), dtype=np.float64)
    ibm_cols = np.ascontiguousarray(np.transpose(ibm, (0, 2, 1))).reshape(nj, 16)
    ibm_acc = blob.add(ibm_cols, _FLOAT, "MAT4")
    skins.append(g.Skin(name="skin", joints=list(range(nj)), inverseBindMatrices=ibm_acc,
                        skeleton=roots[0] if len(roots) == 1 else None))

    animations = []
    for ai, (name, clip) in enumerate(clip_map.items()):
        full = clip.pose.broadcast()
        t = full.translations
        q_raw = full.rotations
        s = full.scales
        for what, arr in (("translations", t), ("rotations", q_raw), ("scales", s)):
            if not np.all(np.isfinite(arr)):
                raise FileFormatError(spath, f"animations[{ai}]", f"clip {name!r} has NaN or inf {what}")
        if np.any(s <= 0.0):
            raise FileFormatError(spath, f"animations[{ai}]", f"clip {name!r} has zero or negative scales")
        nf = clip.n_frames
        times = clip.times if clip.times is not None else np.arange(nf) / float(clip.fps)
        t32 = times.astype(np.float32)
        if np.any(np.diff(t32) <= 0.0):
            raise FileFormatError(spath, f"animations[{ai}]",
                                  f"clip {name!r}: frame times do not strictly increase in float32")
        # Keep each track on one hemisphere so LINEAR (slerp) between keys takes the short way.
        q = rotation.normalize(q_raw)
        for fr in range(1, nf):
            flip = np.sum(q[fr] * q[fr - 1], axis=-1) < 0.0
            q[fr, flip] *= -1.0
        inp = blob.add(t32.reshape(-1, 1), _FLOAT, "SCALAR", minmax=True)
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
                out = blob.add(arr[:, j], _FLOAT, typ)
                samplers.append(g.AnimationSampler(input=inp, output=out, interpolation="LINEAR"))
                channels.append(g.AnimationChannel(sampler=len(samplers) - 1,
                                                   target=g.AnimationChannelTarget(node=j, path=path_name)))
        if not channels:
            # A clip equal to the rest pose still needs one channel (animations need >= 1).
            out = blob.add(q[:, roots[0]], _FLOAT, "VEC4")
            samplers.append(g.AnimationSampler(input=inp, output=out, interpolation="LINEAR"))
            channels.append(g.AnimationChannel(sampler=0, target=g.AnimationChannelTarget(node=roots[0],
                                                                                          path="rotation")))
        animations.append(g.Animation(name=name, samplers=samplers, channels=channels))

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
    inputs = [skeleton.meta["source"]] if isinstance(skeleton.meta.get("source"), str) else []
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
    from ._atomic import atomic_write

    with atomic_write(spath, mode="wb", inputs=inputs) as f:
        f.write(out_bytes)


# ============================================================= generated skin
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


def bone_mesh(skeleton: Skeleton, *, radius: float | None = None, segments: int = 8, rings: int = 3) -> GltfMesh:
    """A generated skin: one capsule per bone (parent joint to child joint), weighted 1 to the parent.

    ``radius`` defaults to 12% of each bone's rest length.  Built at the rest
    pose in world space with ``IBM = inverse(T_world_joint)``, so posing the
    skeleton moves each capsule rigidly with its bone.  Bones shorter than
    ``BONE_MIN_LENGTH_RATIO`` of the skeleton's extent get no capsule (no
    direction); a skeleton with no such bone gets a sphere on every joint.
    """
    from ..fk import forward_kinematics

    fk = forward_kinematics(skeleton, skeleton.rest_pose(), matrices=True)
    world = fk.matrices
    assert world is not None
    p = fk.positions
    extent = float(np.max(np.ptp(p, axis=0))) if skeleton.n_joints > 1 else 0.0
    min_len = BONE_MIN_LENGTH_RATIO * extent
    pos_l: list[FloatArray] = []
    nrm_l: list[FloatArray] = []
    tri_l: list[IntArray] = []
    jnt_l: list[IntArray] = []
    base = 0
    z = np.array([0.0, 0.0, 1.0])
    bones = [(int(skeleton.parents[j]), j) for j in range(skeleton.n_joints) if skeleton.parents[j] >= 0]
    bones = [(a, b) for a, b in bones if np.linalg.norm(p[b] - p[a]) > min_len and extent > 0.0]
    if not bones:
        # Degenerate skeleton (one joint, or all joints on one spot): a sphere per joint.
        r0 = radius if radius is not None else (0.05 * extent if extent > 0.0 else 0.05)
        segs = [(j, j, r0) for j in range(skeleton.n_joints)]
    else:
        segs = []
        for a, b in bones:
            length = float(np.linalg.norm(p[b] - p[a]))
            segs.append((a, b, radius if radius is not None else 0.12 * length))
    for a, b, rad in segs:
        d = p[b] - p[a]
        length = float(np.linalg.norm(d))
        cp, cn, ct = _capsule(length, rad, segments, rings)
        qd = rotation.from_two_vectors(z, d) if length > 0.0 else np.array([0.0, 0.0, 0.0, 1.0])
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
    return GltfMesh(
        positions=np.concatenate(pos_l),
        indices=np.concatenate(tri_l),
        joints=joints,
        weights=weights,
        inverse_bind_matrices=np.asarray(np.linalg.inv(world), dtype=np.float64),
        normals=np.concatenate(nrm_l),
        name="bones",
    )

