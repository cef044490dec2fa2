"""The checked glTF reader: the GLB / ``.gltf`` container and every JSON value, index and byte.

:func:`parse_container` turns a file's bytes into the JSON document and the
GLB binary chunk; :class:`CheckedDoc` gives checked access to that document:
every index, count, offset and length is checked before any byte is read, so
a broken file raises :class:`kinema.FileFormatError` naming the file and the
JSON path (``accessors[9].count``), never another exception type.  Buffer
files are read only from the asset's own folder and only when regular
(:meth:`CheckedDoc.resource_path`, :func:`kinema.io._read.read_regular`),
or, for a file copied elsewhere (a Dask worker), from the :class:`ExternalFiles`
that :func:`read_external` read beside the file with the same checks;
and every decoded array is charged to the file's decoding budget
(:data:`DECODE_BUDGET_FLOOR`, :data:`DECODE_BUDGET_FACTOR`) before it is
allocated.

Conventions (glTF 2.0 spec): accessor data little-endian, matrices column-major.
"""

from __future__ import annotations

import base64
import binascii
import decimal
import json
import math
import os
import re
import struct
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn

import numpy as np
from numpy.typing import NDArray

from ..._types import FloatArray
from ...errors import FileFormatError
from .._read import PATH_CHARS, check_path, fewer_bytes, read_regular, short_repr

__all__ = [
    "CheckedDoc", "ExternalFiles", "read_external", "parse_container", "short_repr", "ceil4", "COMPONENTS",
    "N_COMPONENTS", "FLOAT", "UBYTE", "USHORT", "UINT", "ARRAY_BUFFER", "ELEMENT_ARRAY_BUFFER", "MAX_BUFFER_BYTES",
    "DECODE_BUDGET_FLOOR", "DECODE_BUDGET_FACTOR",
]

_GLB_MAGIC = b"glTF"
_GLB_HEADER = 12
_GLB_CHUNK_JSON = 0x4E4F534A
_GLB_CHUNK_BIN = 0x004E4942

#: componentType -> (little-endian numpy dtype, bytes per component)
COMPONENTS: dict[int, tuple[str, int]] = {
    5120: ("<i1", 1),
    5121: ("<u1", 1),
    5122: ("<i2", 2),
    5123: ("<u2", 2),
    5125: ("<u4", 4),
    5126: ("<f4", 4),
}
N_COMPONENTS = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT2": 4, "MAT3": 9, "MAT4": 16}
FLOAT = 5126
UBYTE, USHORT, UINT = 5121, 5123, 5125
ARRAY_BUFFER, ELEMENT_ARRAY_BUFFER = 34962, 34963
#: The characters of a base64 payload (RFC 4648 alphabet, at most two padding characters at the end).
_BASE64_RE = re.compile(r"[A-Za-z0-9+/]*={0,2}")

#: Largest buffer read (``buffers[i].byteLength``): GLB's own limit (its lengths are uint32).
MAX_BUFFER_BYTES = (1 << 32) - 1

#: Decoding budget of one file: accessors (as float64/int64 arrays) and clips together may
#: take at most ``DECODE_BUDGET_FLOOR`` bytes plus ``DECODE_BUDGET_FACTOR`` times the bytes the file
#: holds (its JSON or GLB, and every buffer read).  Real data expands at most 8x (normalized bytes to
#: float64); the budget refuses, before allocating, a tiny file whose counts ask for gigabytes
#: (e.g. ``count = 2**24`` MAT4 without a bufferView: 2 GiB from 25 KB).
DECODE_BUDGET_FLOOR = 64 << 20
DECODE_BUDGET_FACTOR = 64


#: Byte counts below this are printed in full in a budget failure; larger ones as ``1.23e+45``.
_EXACT_BYTES_BELOW = 10**15


def _three_digits(n: int) -> str:
    """An int of any size as ``1.23e+45`` (three significant digits).

    An absurd count (a huge resampling rate) would print hundreds of digits, and ``float(n)`` overflows past
    ~1.8e308 (``OverflowError``): :class:`decimal.Decimal` holds the int exactly and rounds it.
    """
    return format(decimal.Decimal(n), ".2e")


def ceil4(n: int) -> int:
    """``n`` rounded up to a multiple of 4 (GLB chunks and matrix columns are 4-byte aligned)."""
    return (n + 3) & ~3


@dataclass(frozen=True)
class ExternalFiles:
    """A glTF file's external buffer files, read beside the file by :func:`read_external`, for a loader that
    cannot read the file's folder (a Dask worker on another machine gets the file's bytes and these).

    * ``files``: buffer ``uri`` (as written in the file) -> (the file it resolved to, its first bytes: as many
      as the largest buffer naming that file asks for, fewer when the file is shorter);
    * ``refused``: buffer ``uri`` -> why the loader refuses it (outside the folder, not a regular file, ...).

    :class:`CheckedDoc` given these reads nothing from disk: each buffer's bytes, and each failure's message,
    are the ones reading the file in its folder gives.
    """

    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)


class CheckedDoc:
    """Checked access to a parsed glTF document; every failure names its JSON path.

    ``external``: the file's external buffers read elsewhere (:func:`read_external`); None reads them from
    ``base_dir``.
    """

    def __init__(self, path: str, doc: dict[str, Any], glb_bin: bytes | None, base_dir: str,
                 doc_bytes: int = 0, external: ExternalFiles | None = None) -> None:
        self.path = path
        self.doc = doc
        self.glb_bin = glb_bin
        self.base_dir = base_dir
        self.external = external
        #: The bytes ``external`` holds by resolved file (a file named by several uris is there once).
        self._shipped = None if external is None else dict(external.files.values())
        self._buffers: dict[int, memoryview] = {}
        #: External files read so far (resolved path -> bytes): buffers that share a file read it once.
        self._files: dict[str, bytes] = {}
        self._accessors: dict[tuple[int, str], NDArray[Any]] = {}
        #: Bytes still allowed for decoded arrays (grows by DECODE_BUDGET_FACTOR per buffer byte read).
        self.budget_left = DECODE_BUDGET_FLOOR + DECODE_BUDGET_FACTOR * (len(glb_bin or b"") + doc_bytes)

    def charge(self, nbytes: int, where: str, what: str) -> None:
        """Take ``nbytes`` from the decoding budget, or fail at ``where`` before anything is allocated."""
        if nbytes > self.budget_left:
            need = f"{nbytes:,}" if nbytes < _EXACT_BYTES_BELOW else _three_digits(nbytes)
            self.fail(where, f"{what} needs {need} bytes, more than this file may decode "
                             f"({self.budget_left:,} bytes left of its budget: {DECODE_BUDGET_FLOOR:,} plus "
                             f"{DECODE_BUDGET_FACTOR} per byte of file data)")
        self.budget_left -= nbytes

    def fail(self, where: str, message: str) -> NoReturn:
        raise FileFormatError(self.path, where, message)

    # ---------------------------------------------------------- JSON values
    def top(self, key: str) -> list[Any]:
        v = self.doc.get(key, [])
        if not isinstance(v, list):
            self.fail(key, f"must be an array, got {short_repr(v)}")
        return v

    def item(self, key: str, i: int) -> dict[str, Any]:
        arr = self.top(key)
        if not 0 <= i < len(arr):
            self.fail(f"{key}[{i}]", f"does not exist (the file has {len(arr)} {key})")
        v = arr[i]
        if not isinstance(v, dict):
            self.fail(f"{key}[{i}]", f"must be an object, got {short_repr(v)}")
        return v

    def obj(self, parent: dict[str, Any], key: str, where: str, *, required: bool = True) -> dict[str, Any] | None:
        if key not in parent:
            if required:
                self.fail(where, f"required property {key!r} is missing")
            return None
        v = parent[key]
        if not isinstance(v, dict):
            self.fail(f"{where}.{key}", f"must be an object, got {short_repr(v)}")
        return v

    def array(self, parent: dict[str, Any], key: str, where: str, *, required: bool = True) -> list[Any]:
        if key not in parent:
            if required:
                self.fail(where, f"required property {key!r} is missing")
            return []
        v = parent[key]
        if not isinstance(v, list):
            self.fail(f"{where}.{key}", f"must be an array, got {short_repr(v)}")
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
            self.fail(where, f"must be an integer, got {short_repr(v)}")
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
            self.fail(where, f"must be an index into {collection}, got {short_repr(v)}")
        if not 0 <= v < n:
            self.fail(where, f"refers to {collection}[{v}] but the file has {n} {collection}")
        return v

    def numbers(self, parent: dict[str, Any], key: str, where: str, n: int, default: Sequence[float]) -> FloatArray:
        if key not in parent:
            return np.array(default, dtype=np.float64)
        v = parent[key]
        w = f"{where}.{key}"
        if not isinstance(v, list) or len(v) != n:
            self.fail(w, f"must be an array of {n} numbers, got {short_repr(v)}")
        for x in v:
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
                self.fail(w, f"must hold finite numbers, got {short_repr(x)}")
        return np.array(v, dtype=np.float64)

    def string(self, parent: dict[str, Any], key: str, where: str) -> str | None:
        v = parent.get(key)
        if v is not None and not isinstance(v, str):
            self.fail(f"{where}.{key}", f"must be a string, got {short_repr(v)}")
        return v

    # ------------------------------------------------------------- binary
    @property
    def files_read(self) -> tuple[str, ...]:
        """The external files this document's buffers were read from (resolved paths): inputs a writer must not
        replace."""
        return tuple(self._files)

    def buffer(self, i: int) -> memoryview:
        """The ``byteLength`` bytes of buffer ``i`` (a view: buffers of one file share its bytes, read once)."""
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
            self.fail(f"{w}.uri", f"must be a string, got {short_repr(uri)}")
        elif uri.startswith("data:"):
            data = self._data_uri(uri, length, f"{w}.uri")
        else:
            file = self._locate(uri, f"{w}.uri")
            known = self._files.get(file, b"")
            if len(known) >= length:
                data = known  # another buffer's file, read already: no second read, no second budget
                length_new = 0
            else:
                data = self._read_file(file, f"{w}.uri", length)
                self._files[file] = data
                length_new = length - len(known)
            self._buffers[i] = view = memoryview(data)[:length]
            self.budget_left += DECODE_BUDGET_FACTOR * length_new
            return view
        if len(data) < length:
            self.fail(f"{w}.byteLength", f"is {length} but the buffer data has only {len(data)} bytes")
        self._buffers[i] = view = memoryview(data)[:length]
        self.budget_left += DECODE_BUDGET_FACTOR * length
        return view

    def _locate(self, uri: str, where: str) -> str:
        """The file a buffer's ``uri`` names (:meth:`resource_path`; with :attr:`external`, as resolved there)."""
        if self.external is None:
            return self.resource_path(uri, where)
        if uri in self.external.refused:
            self.fail(where, self.external.refused[uri])
        if uri not in self.external.files:
            self.fail(where, f"{short_repr(uri)} was not read with the file (external files of another file?)")
        return self.external.files[uri][0]

    def _read_file(self, file: str, where: str, size: int, *, exact: bool = True) -> bytes:
        """The first ``size`` bytes of the external ``file`` (``exact=False``: at most ``size``, fewer when the
        file is shorter), read from disk as a regular file or, with :attr:`external`, taken from there."""
        if self._shipped is not None:
            data = self._shipped[file]
            if exact and len(data) < size:
                self.fail(where, fewer_bytes(file, len(data), size))
            return data[:size]
        try:
            if exact:
                return read_regular(file, report_path=self.path, where=where, size=size)
            return read_regular(file, report_path=self.path, where=where, limit=size)
        except OSError as exc:
            self.fail(where, f"cannot read {short_repr(file, PATH_CHARS)}: {exc.strerror or exc}")

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
            self.fail(where, f"only relative file URIs are supported, got {short_repr(uri)}")
        if parsed.query or parsed.fragment:
            self.fail(where, f"a file URI with a query or fragment is not supported, got {short_repr(uri)}")
        try:
            rel = urllib.parse.unquote(parsed.path, errors="strict")
            os.fsencode(rel)
        except (UnicodeDecodeError, UnicodeEncodeError):
            self.fail(where, f"is not a valid file name after percent-decoding: {short_repr(uri)}")
        if "\0" in rel:
            self.fail(where, "holds a NUL byte (after percent-decoding)")
        if not rel or os.path.isabs(rel):
            self.fail(where, f"must name a file relative to the asset's folder, got {short_repr(uri)}")
        folder = os.path.realpath(self.base_dir)
        file = os.path.realpath(os.path.join(folder, rel))
        if os.path.commonpath([folder, file]) != folder:
            self.fail(where, f"{short_repr(uri)} resolves outside the asset's folder; only files in the folder "
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
        dt, size = COMPONENTS[ct]
        ncomp = N_COMPONENTS[typ]
        if typ.startswith("MAT"):  # each column starts on a 4-byte boundary
            rows = int(typ[3])
            col_bytes = ceil4(rows * size)
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
        acc = self.item("accessors", i)
        w = f"accessors[{i}]"
        # The use's type and component type are checked before the data is read: an accessor of the wrong
        # type is reported as such, not as whatever reading it as its own type runs into (a count that
        # overruns its bufferView).  A type or component type that is not glTF's at all is _accessor's error.
        typ, ct = acc.get("type"), acc.get("componentType")
        if isinstance(typ, str) and typ in N_COMPONENTS and typ not in types:
            self.fail(f"{w}.type", f"is {typ} but {ref} needs {' or '.join(types)}")
        if type(ct) is int and ct in COMPONENTS and ct not in cts:
            self.fail(f"{w}.componentType", f"is {ct} but {ref} needs one of {list(cts)}")
        key = (i, kind)
        if key in self._accessors:
            arr = self._accessors[key]
        else:
            arr = self._accessor(i, kind)
            self._accessors[key] = arr
        if kind == "float" and acc["componentType"] != FLOAT and not acc.get("normalized", False):
            self.fail(f"{w}.normalized", f"integer data used by {ref} must be normalized")
        return arr

    def _accessor(self, i: int, kind: str) -> NDArray[Any]:
        w = f"accessors[{i}]"
        acc = self.item("accessors", i)
        ct = self.integer(acc, "componentType", w)
        if ct not in COMPONENTS:
            self.fail(f"{w}.componentType", f"is {ct}, not one of {sorted(COMPONENTS)}")
        typ = acc.get("type")
        if not isinstance(typ, str) or typ not in N_COMPONENTS:
            self.fail(f"{w}.type", f"is {short_repr(typ)}, not one of {list(N_COMPONENTS)}")
        count = self.integer(acc, "count", w, lo=1)
        normalized = acc.get("normalized", False)
        if not isinstance(normalized, bool):
            self.fail(f"{w}.normalized", f"must be a boolean, got {short_repr(normalized)}")
        if normalized and ct in (FLOAT, UINT):
            self.fail(f"{w}.normalized", "only byte and short components can be normalized")
        if kind == "int" and normalized:
            self.fail(f"{w}.normalized", "integer indices must not be normalized")
        dt, size = COMPONENTS[ct]
        ncomp = N_COMPONENTS[typ]
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
            if ict not in (UBYTE, USHORT, UINT):
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
        if ct == FLOAT:
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


def parse_container(path: str, data: bytes) -> tuple[dict[str, Any], bytes | None]:
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
            pos += 8 + ceil4(clen)
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
        raise FileFormatError(path, "asset.version", f"is {short_repr(asset['version'])}; only glTF 2.x is supported")
    return doc, glb_bin


def read_external(path: str | os.PathLike[str], data: bytes) -> ExternalFiles:
    """The external buffer files of the glTF file ``path`` (``data``: its bytes), read as the loader reads them.

    Each buffer's ``uri`` is resolved and confined to the file's folder
    (:meth:`CheckedDoc.resource_path`) and its file read once, regular files
    only, and no more of it than the largest buffer naming it asks for (the
    whole file when it is shorter).  A uri the loader would refuse is kept
    with its reason, raised only when a buffer that uses it is read (as the
    loader in the folder does).  A file that does not parse, and buffers
    whose ``byteLength`` is invalid, give nothing to read: the loader reports
    them.  Pass the result to :func:`kinema.io.load_gltf` (``external=``)
    wherever the file's bytes are loaded.  A ``path`` that is not a ``str`` or ``os.PathLike`` (or holds a NUL
    character) raises :class:`kinema.SolverInputError`.
    """
    path = check_path(path)
    try:
        doc, glb_bin = parse_container(path, data)
    except FileFormatError:
        return ExternalFiles()
    r = CheckedDoc(path, doc, glb_bin, os.path.dirname(os.path.abspath(path)))
    refused: dict[str, str] = {}
    file_of: dict[str, str] = {}  # uri -> resolved file
    need: dict[str, int] = {}  # resolved file -> bytes its largest buffer asks for
    buffers = doc.get("buffers")
    for i in range(len(buffers) if isinstance(buffers, list) else 0):
        w = f"buffers[{i}]"
        try:
            b = r.item("buffers", i)
            length = r.integer(b, "byteLength", w, lo=1, hi=MAX_BUFFER_BYTES)
        except FileFormatError:
            continue  # the loader fails here, before the uri
        uri = b.get("uri")
        if not isinstance(uri, str) or uri.startswith("data:") or uri in refused:
            continue
        try:
            file = file_of[uri] if uri in file_of else r.resource_path(uri, f"{w}.uri")
        except FileFormatError as exc:
            refused[uri] = exc.reason
            continue
        file_of[uri] = file
        need[file] = max(need.get(file, 0), length)
    read: dict[str, bytes] = {}
    for file, size in need.items():
        try:
            read[file] = r._read_file(file, "buffers", size, exact=False)
        except FileFormatError as exc:
            refused.update((uri, exc.reason) for uri, f in file_of.items() if f == file)
    return ExternalFiles({uri: (f, read[f]) for uri, f in file_of.items() if f in read}, refused)
