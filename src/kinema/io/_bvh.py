"""BVH (Biovision hierarchy) motion files in and out.

A BVH file is a joint tree (``HIERARCHY``: per joint an ``OFFSET`` and a list
of ``CHANNELS``) followed by a ``MOTION`` block: one line per frame holding
every joint's channel values in depth-first order.  kinema reads it as

* a :class:`~kinema.Skeleton`: one joint per ``ROOT``/``JOINT`` and one leaf
  joint per ``End Site`` (named ``<parent>_End``), rest translation = OFFSET,
  rest rotation = identity;
* a :class:`~kinema.Clip` of ``(frames, J, 3|4)`` local translations and xyzw
  rotations at ``fps = 1 / Frame Time``.

Channel semantics (those of Biovision, Blender and bvhio):

* rotation channels are degrees, applied in the listed order about the
  joint's moving axes: ``Zrotation Xrotation Yrotation`` is the intrinsic
  sequence ``"ZXY"``, ``q = Rz Rx Ry`` (:func:`kinema.rotation.from_euler`).
  Any order, and fewer than three rotation channels, are accepted;
* position channels (on the root or any other joint) *replace* the matching
  component of the joint's OFFSET: the local translation of a joint with
  ``Xposition Yposition Zposition`` is the channel values.

The file's layout goes into ``skeleton.meta`` so that saving writes it back:
``meta["bvh_channels"]`` (per joint, the channel names as spelt in the file)
and ``meta["bvh_end_site"]`` (per joint, True for End Sites); ``meta["source"]``
is the path read, which :func:`save_bvh` (like ``save_gltf``) never overwrites.

Units and axes: ``scale`` multiplies every length on load (``scale=0.01``
reads a centimetre file in metres) and divides on save.  kinema's world is
Y-up (as glTF); ``up="z"`` converts a Z-up file on load and writes one on
save, with the change of basis ``C = Rx(-90 deg)``, ``(x, y, z) -> (x, z, -y)``
applied to every joint (``t' = C t``, ``q' = C q C^-1``), so rest rotations
stay identity and world positions become ``C p``.

Errors: anything wrong with a file raises :class:`kinema.FileFormatError`
naming the file and the 1-based line; so does, before the clip is allocated, a
``Frames:`` count whose pose arrays (frames x joints) exceed the decoding budget
glTF files have (``DECODE_BUDGET_FLOOR`` plus ``DECODE_BUDGET_FACTOR`` per file byte).
"""

from __future__ import annotations

import codecs
import math
import os
import re
from collections.abc import Callable, Iterator, Sequence

import numpy as np
from numpy.typing import NDArray

from .. import rotation as rot
from .._types import FloatArray
from .._validate import as_float_scalar, check_flag
from ..errors import FileFormatError, ShapeError, SkeletonError, SolverInputError
from ..pose import Clip, Pose
from ..skeleton import Skeleton, check_skeleton
from ._atomic import atomic_write, source_files
from ._read import check_path, read_regular, short_repr
from .gltf.reader import DECODE_BUDGET_FACTOR, DECODE_BUDGET_FLOOR

__all__ = ["load_bvh", "save_bvh"]

PathLike = str | os.PathLike[str]

#: A saved channel may be dropped (the file's layout kept) only when the value it
#: would carry differs from the implied one (OFFSET component, zero angle) by less
#: than this, in file units or degrees; well below the 1e-6 of the text.
CHANNEL_DROP_TOL = 1e-7

#: glTF stores animation values as float32, each rounded by up to 2**-24 of itself; a skeleton read from
#: glTF (``meta["format"] == "gltf"``) comes with such a clip.  For it a channel its layout lacks is added
#: only for motion beyond that rounding (else BVH -> glTF -> BVH would widen the file's layout by channels of
#: pure rounding noise): a position axis when the translation leaves the OFFSET by more than this fraction of
#: the OFFSET's length (the rounding, 4x for the scale and up-axis conversions on the way) ...
F32_TRANSLATION_RTOL = 4 * 2.0**-24

#: ... and a rotation axis when the kept axes alone cannot reproduce the rotation to within this many degrees
#: (:func:`_refit_kept`): a float32 quaternion is off by at most 2**-23 in norm, a rotation of 2**-22 rad;
#: with an 8x margin that is 2**-19 rad (1.1e-4 degrees, 2 micrometres at the end of a 1 m bone).
F32_ANGLE_TOL = math.degrees(2.0**-19)

#: Clip frame times (``clip.times``) count as evenly spaced, and so writable as BVH
#: frames at their mean step, when no step differs from the mean step by more than
#: this fraction of the clip's largest ``|time|``: even as far as stored key times
#: can tell.  glTF stores them as float32, rounded by up to 2**-24 (6e-8) of their
#: value; exporters that compute them in float32 or pass them through 7-digit text
#: (COLLADA) are off by several times that (the steps of Khronos' RiggedSimple
#: sample deviate by 3e-7 of its largest time), and a step, the difference of two
#: times, by up to twice a time's error.  For times from 0 this is 1e-6 of a step per
#: frame: one time off by 1% of a step is refused in clips under 10,000 frames
#: (5.5 min at 30 fps), a dropped frame in clips under 1,000,000.  The command line
#: asks the same question (:func:`evenly_spaced`).
EVEN_FRAMES_RTOL = 1e-6

#: Scales within this of 1 count as "no scale" (BVH has no scale channels).
UNIT_SCALE_TOL = 1e-9

#: ``save_bvh`` refuses a ``precision`` whose rounding (half a unit of the last decimal) is more than this
#: fraction of the skeleton's median bone length: the file would not hold the skeleton's shape.
RESOLUTION_RTOL = 1e-2

#: Motion values the fast scanner could not convert exactly and leaves to
#: ``float()``; the first call reserves this many slots, a retry the exact count.
_SLOW_TOKEN_SLOTS = 256

#: Fixed-point values below this (2**53) are printed from exact integers by the
#: kernel; larger ones fall back to Python's formatting.
MAX_EXACT_DIGITS = float(2**53)

#: The writer indents a joint by its depth in tabs, at most this many: indentation means nothing
#: to a reader, and without a cap a deep chain's file would grow with the square of its depth.
MAX_INDENT = 32

_AXES = "XYZ"
_CHANNEL_KINDS = {"position", "rotation"}

#: Z-up to Y-up change of basis, Rx(-90 deg) as xyzw: maps +Z to +Y and +Y to -Z.
_Z_TO_Y = np.array([-math.sqrt(0.5), 0.0, 0.0, math.sqrt(0.5)])

#: A count (CHANNELS, Frames) is ASCII digits, at most this many (int() refuses other digits
#: such as "²", and far longer strings only arrive in broken files).
_MAX_COUNT_DIGITS = 18
_COUNT_RE = re.compile(f"[0-9]{{1,{_MAX_COUNT_DIGITS}}}")
_NUMBER_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")
_LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)?")
_FRAMES_RE = re.compile(r"frames\s*:\s*(\S+)\Z", re.IGNORECASE)
_FRAME_TIME_RE = re.compile(r"frame\s+time\s*:\s*(\S+)\Z", re.IGNORECASE)


# =====================================================================  load
class _Lines:
    """Non-blank lines of ``text`` with 1-based numbers, read one at a time."""

    def __init__(self, text: str, path: PathLike | None) -> None:
        self._text = text
        self._iter = _LINE_RE.finditer(text)
        self.path = path
        self.number = 0  # number of the line last returned
        self.end = 0  # character offset just past the line last returned

    def next(self, what: str) -> str:
        """The next non-blank line, stripped; FileFormatError naming ``what`` at the end of the file."""
        for m in self._iter:
            if m.end() == m.start():  # the empty match after the last line
                break
            self.number += 1
            self.end = m.end()
            line = m.group().strip()
            if line:
                return line
        if not self._text.strip():
            raise self.error(f"empty file: expected {what}", 1)
        raise self.error(f"unexpected end of file: expected {what}", self.number or 1)

    def error(self, message: str, line: int | None = None) -> FileFormatError:
        return FileFormatError(self.path, self.number if line is None else line, message)


def _number(token: str, lines: _Lines, what: str) -> float:
    if not _NUMBER_RE.match(token):
        raise lines.error(f"{what}: {short_repr(token)} is not a number")
    value = float(token)
    if not math.isfinite(value):
        raise lines.error(f"{what}: {short_repr(token)} is out of range")
    return value


def _tokens(lines: _Lines, expected: Callable[[], str] = lambda: "MOTION") -> Iterator[tuple[str, str]]:
    """Hierarchy tokens as ``(KEY, text)``; stops after yielding ``("MOTION", "")``.

    ``expected()`` says what the file should go on with, for the message at an early end of the file.

    KEY is the upper-cased keyword.  ``ROOT``/``JOINT`` carry the joint name
    (the rest of the line, which may contain spaces); ``OFFSET`` and
    ``CHANNELS`` carry the rest of their line; a ``{`` at the end of a
    ``ROOT``/``JOINT``/``End Site`` line is yielded as its own token.
    """
    while True:
        line = lines.next(expected())
        parts = line.split(None, 1)
        head = parts[0]
        rest = parts[1].strip() if len(parts) > 1 else ""
        key = head.upper()
        if key in ("ROOT", "JOINT", "END"):
            brace = rest.endswith("{")
            if brace:
                rest = rest[:-1].rstrip()
            if key == "END":
                if rest.upper() != "SITE":
                    raise lines.error(f"expected 'End Site', got {short_repr(line)}")
                yield "END SITE", ""
            else:
                yield key, rest
            if brace:
                yield "{", ""
        elif key in ("{", "}"):
            if rest:  # several braces on one line ("} }"): each is a token
                for part in line.split():
                    if part not in ("{", "}"):
                        raise lines.error(f"unexpected text after a brace: {short_repr(line)}")
                    yield part, ""
            else:
                yield key, ""
        elif key in ("OFFSET", "CHANNELS", "HIERARCHY"):
            yield key, rest
        elif key == "MOTION":
            if rest:
                raise lines.error(f"unexpected text after MOTION: {short_repr(rest)}")
            yield key, ""
            return
        else:
            raise lines.error(f"unknown keyword {short_repr(head)}")


class _Hierarchy:
    """The parsed HIERARCHY block, joints in file (depth-first) order."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.parents: list[int] = []
        self.offsets: list[tuple[float, float, float] | None] = []
        self.channels: list[tuple[str, ...]] = []
        self.end_site: list[bool] = []
        self.lines: list[int] = []


def _parse_channels(rest: str, lines: _Lines) -> tuple[str, ...]:
    parts = rest.split()
    if not parts or not _COUNT_RE.fullmatch(parts[0]):
        raise lines.error(f"CHANNELS must start with the channel count (digits 0-9), got {short_repr(rest)}")
    count = int(parts[0])
    names = tuple(parts[1:])
    if count != len(names):
        raise lines.error(f"CHANNELS says {count} channels but lists {len(names)}: {short_repr(' '.join(names))}")
    problem = channel_problem(names)
    if problem is not None:
        raise lines.error(problem)
    return names


def channel_problem(names: Sequence[str]) -> str | None:
    """Why ``names`` is not one joint's channel list (``"Xposition"`` ... ``"Zrotation"``, any case, each at
    most once), or None when it is one.  The BVH reader and the glTF reader (a layout kept in node extras,
    written back into BVH text by :func:`save_bvh`) share this one rule."""
    seen: set[str] = set()
    for name in names:
        key = name.lower()
        if len(key) != 9 or key[0] not in "xyz" or key[1:] not in _CHANNEL_KINDS:
            return f"unknown channel {short_repr(name)} (expected X/Y/Z position or rotation)"
        if key in seen:
            return f"channel {short_repr(name)} is listed twice"
        seen.add(key)
    return None


def _parse_hierarchy(lines: _Lines) -> _Hierarchy:
    h = _Hierarchy()
    stack: list[int] = []  # open joints
    expect_brace = False
    started = False

    def expected() -> str:  # what comes next, for the message at an early end of the file
        if not started:
            return "HIERARCHY"
        if expect_brace:
            return f"'{{' to open joint {short_repr(h.names[-1])}"
        if stack:
            return f"'}}' to close joint {short_repr(h.names[stack[-1]])}"
        return "MOTION" if h.names else "ROOT"

    tokens = _tokens(lines, expected)
    key, _ = next(tokens)
    if key != "HIERARCHY":
        raise lines.error("a BVH file starts with HIERARCHY")
    started = True
    name_line: dict[str, int] = {}
    for key, rest in tokens:
        if expect_brace:
            if key != "{":
                raise lines.error(f"expected '{{' to open joint {short_repr(h.names[-1])}")
            expect_brace = False
            continue
        if key in ("ROOT", "JOINT", "END SITE"):
            if key == "ROOT" and stack:
                raise lines.error("ROOT inside another joint (use JOINT)")
            if key != "ROOT" and not stack:
                raise lines.error(f"{'JOINT' if key == 'JOINT' else 'End Site'} outside of a ROOT block")
            if stack and h.end_site[stack[-1]]:
                raise lines.error("an End Site cannot have children")
            parent = stack[-1] if stack else -1
            if key == "END SITE":
                name = _end_site_name(h.names[parent], name_line)
            else:
                name = rest
                if not name:
                    raise lines.error(f"{key} without a name")
                if name in name_line:
                    other = h.names.index(name)
                    if not h.end_site[other]:
                        raise lines.error(f"joint name {short_repr(name)} is used twice "
                                          f"(first on line {name_line[name]})")
                    # An End Site's made-up name yields to a joint's own (a later JOINT Head_End beside Head's
                    # End Site): the End Site takes the next free one.
                    del name_line[name]
                    h.names[other] = _end_site_name(h.names[h.parents[other]], name_line, also_taken=name)
                    name_line[h.names[other]] = h.lines[other]
            name_line[name] = lines.number
            h.names.append(name)
            h.parents.append(parent)
            h.offsets.append(None)
            h.channels.append(())
            h.end_site.append(key == "END SITE")
            h.lines.append(lines.number)
            stack.append(len(h.names) - 1)
            expect_brace = True
        elif key == "OFFSET":
            if not stack:
                raise lines.error("OFFSET outside of a joint")
            j = stack[-1]
            if h.offsets[j] is not None:
                raise lines.error(f"joint {short_repr(h.names[j])} has a second OFFSET")
            parts = rest.split()
            if len(parts) != 3:
                raise lines.error(f"OFFSET needs 3 numbers, got {len(parts)}")
            x, y, z = (_number(p, lines, "OFFSET") for p in parts)
            h.offsets[j] = (x, y, z)
        elif key == "CHANNELS":
            if not stack:
                raise lines.error("CHANNELS outside of a joint")
            j = stack[-1]
            if h.end_site[j]:
                raise lines.error("an End Site has no CHANNELS")
            if h.channels[j]:
                raise lines.error(f"joint {short_repr(h.names[j])} has a second CHANNELS line")
            h.channels[j] = _parse_channels(rest, lines)
        elif key == "}":
            if not stack:
                raise lines.error("'}' without an open joint")
            j = stack.pop()
            if h.offsets[j] is None:
                raise lines.error(f"joint {short_repr(h.names[j])} has no OFFSET")
        elif key == "{":
            raise lines.error("unexpected '{'")
        elif key == "MOTION":
            if stack:
                raise lines.error(f"MOTION before joint {short_repr(h.names[stack[-1]])} is closed (missing '}}')")
            if not h.names:
                raise lines.error("the HIERARCHY has no ROOT")
            return h
        else:  # HIERARCHY twice
            raise lines.error(f"unexpected {key}")
    raise AssertionError("unreachable: _tokens ends with MOTION or raises")  # pragma: no cover


def _line_breaks(data: bytes) -> int:
    """How many lines end in ``data``: CRLF, a lone CR and a lone LF each end one (as the MOTION scanner counts)."""
    return data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")


def _end_site_name(parent: str, taken: dict[str, int], also_taken: str | None = None) -> str:
    """The name of an End Site under ``parent``: ``<parent>_End``, or ``<parent>_End2``, ``_End3``, ... when taken."""
    base = f"{parent}_End"
    name, k = base, 2
    while name in taken or name == also_taken:
        name, k = f"{base}{k}", k + 1
    return name


def _decode(data: bytes, path: PathLike | None) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = _line_breaks(data[: exc.start]) + 1
        bad = f"byte 0x{data[exc.start]:02x} at offset {exc.start}"
        raise FileFormatError(path, line, f"not UTF-8 text ({bad})") from None
    return text[1:] if text.startswith("\ufeff") else text


def _scan(data: bytes, start: int, n_frames: int, n_ch: int, first_line: int, path: PathLike | None) -> FloatArray:
    """The MOTION values as ``(n_frames, n_ch)``; ``first_line`` is the file line of ``data[start]``."""
    from .._kernels._tier import kernels

    kb = kernels("bvh")

    buf = np.frombuffer(data, dtype=np.uint8)
    if n_frames and n_ch == 0:
        raise FileFormatError(path, first_line, f"{n_frames} frames declared but the skeleton has no channels")
    # Every value takes at least two bytes (a digit and a separator, the last one
    # one): never allocate for more frames than the data can hold, whatever
    # "Frames:" claims; the scan then reports the first bad line or the truncation.
    most = (len(data) - start + 1) // 2 // max(n_ch, 1) + 1
    rows = min(n_frames, most)
    out = np.empty((rows, n_ch))
    status = np.zeros(kb.STATUS_LEN, dtype=np.int64)
    slow = np.empty((_SLOW_TOKEN_SLOTS, 4), dtype=np.int64)
    kb.scan_motion(buf, start, out, slow, status)
    if status[0] == kb.OK and status[5] > slow.shape[0]:
        slow = np.empty((int(status[5]), 4), dtype=np.int64)
        kb.scan_motion(buf, start, out, slow, status)
    code, line, byte, count, frames_read = (int(v) for v in status[:5])
    where = first_line + line
    if code == kb.BAD_TOKEN:
        end = byte
        while end < len(data) and data[end] not in b" \t\r\n\v\f":
            end += 1
        token = data[byte:end].decode("utf-8", "replace")
        raise FileFormatError(path, where, f"non-numeric value {short_repr(token)} in frame {frames_read + 1}")
    if code == kb.BAD_COUNT:
        got = f"more than {n_ch}" if count > n_ch else str(count)
        at_end = _line_breaks(data[start:].rstrip()) <= line if count < n_ch else False
        if at_end:
            raise FileFormatError(path, where, f"truncated MOTION: frame {frames_read + 1} has {got} of {n_ch} values")
        raise FileFormatError(path, where,
                              f"frame {frames_read + 1} has {got} values, the HIERARCHY defines {n_ch} channels")
    if code == kb.EXTRA_DATA:
        raise FileFormatError(path, where, f"more frame data than the {n_frames} frames declared in 'Frames:'")
    if frames_read != n_frames:
        last = first_line + _line_breaks(data[start:].rstrip())
        raise FileFormatError(path, last, f"truncated MOTION: {frames_read} of the {n_frames} declared frames present")
    flat = out.reshape(-1)
    for s, e, idx, ln in slow[: int(status[5])]:
        value = float(data[s:e])  # syntax already checked by the scanner
        if not math.isfinite(value):
            raise FileFormatError(path, first_line + int(ln), f"value {short_repr(data[s:e].decode())} is out of range")
        flat[idx] = value
    return out


def _padded_sequence(axes: str, default: str = "ZXY") -> str:
    """``axes`` (distinct, 0-3 letters) completed with the missing axes, in ``default``'s order."""
    return axes + "".join(a for a in default if a not in axes)


def _change_basis(q_change: FloatArray, t: FloatArray, r: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``(C t, C r C^-1)`` for translations ``(..., 3)`` and rotations ``(..., 4)``."""
    t_new = rot.rotate(q_change, t)
    r_new = rot.multiply(rot.multiply(q_change, r), rot.conjugate(q_change))
    return t_new, r_new


def _check_up(up: str) -> str:
    if not isinstance(up, str) or up.lower() not in ("y", "z"):
        raise SolverInputError(f"up must be 'y' or 'z', got {up!r}")
    return up.lower()


def _check_scale(scale: float) -> float:
    """``scale`` as a positive finite float: a real number (NumPy's, and a 0-d array of one, as the number it
    holds); :class:`kinema.SolverInputError` otherwise (``float()`` would also read ``"2"`` and ``True``)."""
    try:
        s = as_float_scalar(scale, "scale")
    except SolverInputError:
        raise SolverInputError(f"scale must be a positive finite number, got {short_repr(scale)}") from None
    if not (math.isfinite(s) and s > 0):
        raise SolverInputError(f"scale must be positive and finite, got {short_repr(scale)}")
    return s


def load_bvh(path: PathLike, *, scale: float = 1.0, up: str = "y") -> tuple[Skeleton, Clip]:
    """Read a BVH file: ``(skeleton, clip)``.

    * ``scale``: multiplies every length (OFFSETs and position channels);
      e.g. ``0.01`` reads a centimetre file in metres.
    * ``up``: the file's up axis, ``"y"`` (no change) or ``"z"`` (converted to
      kinema's Y-up, see the module notes).

    The clip holds full arrays: ``clip.pose.translations`` ``(F, J, 3)``,
    ``clip.pose.rotations`` ``(F, J, 4)`` xyzw; ``clip.fps = 1 / Frame Time``.
    End Sites are leaf joints (``skeleton.meta["bvh_end_site"]``); the channel
    layout is ``skeleton.meta["bvh_channels"]``; ``skeleton.meta["source"]`` is ``path``, absolute and resolved.

    Raises :class:`kinema.FileFormatError` (file and line) for any malformed
    file or one that is not a regular file (a FIFO, a device);
    ``OSError`` when the file cannot be read; :class:`kinema.SolverInputError`
    for a bad ``path`` (not a ``str`` or ``os.PathLike``, or holding a NUL character), ``scale`` or ``up``.
    """
    spath = check_path(path)
    scale = _check_scale(scale)
    up = _check_up(up)
    data = read_regular(spath)
    return _parse(data, spath, scale, up)


def _parse(data: bytes, path: PathLike | None, scale: float, up: str) -> tuple[Skeleton, Clip]:
    text = _decode(data, path)
    lines = _Lines(text, path)
    h = _parse_hierarchy(lines)
    line = lines.next("'Frames:'")
    m = _FRAMES_RE.match(line)
    if not m or not _COUNT_RE.fullmatch(m.group(1)):
        raise lines.error(f"expected 'Frames: <count>' (digits 0-9, at most {_MAX_COUNT_DIGITS}), "
                          f"got {short_repr(line)}")
    n_frames = int(m.group(1))
    frames_line = lines.number
    line = lines.next("'Frame Time:'")
    m = _FRAME_TIME_RE.match(line)
    if not m:
        raise lines.error(f"expected 'Frame Time: <seconds>', got {short_repr(line)}")
    frame_time = _number(m.group(1), lines, "Frame Time")
    if frame_time <= 0:
        raise lines.error(f"Frame Time must be positive, got {frame_time}")
    if not math.isfinite(1.0 / frame_time):
        raise lines.error(f"Frame Time {m.group(1)} is too small: the frame rate 1 / Frame Time overflows")
    # The motion starts right after the Frame Time line (byte offset, as the
    # hierarchy may hold multi-byte names).
    start = len(text[: lines.end].encode("utf-8")) + (3 if data.startswith(codecs.BOM_UTF8) else 0)
    n_ch = sum(len(c) for c in h.channels)
    values = _scan(data, start, n_frames, n_ch, lines.number + 1, path)
    # The clip holds (frames, joints, 3 + 4) float64 whatever the channel count: budget it as
    # glTF does, so that a small file of many channel-less joints cannot ask for gigabytes.
    need = n_frames * len(h.names) * 7 * 8
    budget = DECODE_BUDGET_FLOOR + DECODE_BUDGET_FACTOR * len(data)
    if need > budget:
        raise FileFormatError(path, frames_line, f"{n_frames} frames of {len(h.names)} joints need {need:,} bytes "
                                                 f"of pose arrays, more than this file may decode ({budget:,} bytes: "
                                                 f"{DECODE_BUDGET_FLOOR:,} plus {DECODE_BUDGET_FACTOR} per file byte)")
    return _build(h, values, frame_time, scale, up, path)


def _build(h: _Hierarchy, values: FloatArray, frame_time: float, scale: float, up: str,
           path: PathLike | None) -> tuple[Skeleton, Clip]:
    n_joints = len(h.names)
    n_frames = values.shape[0]
    offsets = np.array(h.offsets, dtype=np.float64).reshape(n_joints, 3)
    # Channel columns: translations[:, pj, pa] = values[:, pc]; Euler groups by sequence.
    pos_j: list[int] = []
    pos_a: list[int] = []
    pos_c: list[int] = []
    groups: dict[str, tuple[list[int], list[list[int]]]] = {}
    zero_col = values.shape[1]  # index of an appended column of zeros (missing angles)
    col = 0
    for j, chans in enumerate(h.channels):
        rot_axes = ""
        rot_cols: dict[str, int] = {}  # axis -> column
        for name in chans:
            axis = name[0].upper()
            if name[1:].lower() == "position":
                pos_j.append(j)
                pos_a.append(_AXES.index(axis))
                pos_c.append(col)
            else:
                rot_axes += axis
                rot_cols[axis] = col
            col += 1
        if rot_axes:
            seq = _padded_sequence(rot_axes)
            joints, cols = groups.setdefault(seq, ([], []))
            joints.append(j)
            cols.append([rot_cols[a] if a in rot_cols else zero_col for a in seq])  # missing axes read the zero column
    t = np.empty((n_frames, n_joints, 3))
    t[:] = offsets
    if pos_j:
        t[:, pos_j, pos_a] = values[:, pos_c]
    r = np.zeros((n_frames, n_joints, 4))
    r[..., 3] = 1.0
    if groups:
        ext = np.concatenate([values, np.zeros((n_frames, 1))], axis=1)
        for seq, (joints, cols) in groups.items():
            angles = ext[:, np.asarray(cols)]  # (F, k, 3) degrees in sequence order
            r[:, joints] = rot.from_euler(seq, angles, degrees=True)
    if scale != 1.0:
        t *= scale
        offsets = offsets * scale
    rest_r = np.zeros((n_joints, 4))
    rest_r[:, 3] = 1.0
    if up == "z":
        t, r = _change_basis(_Z_TO_Y, t, r)
        offsets = rot.rotate(_Z_TO_Y, offsets)
    meta: dict[str, object] = {"bvh_channels": tuple(h.channels), "bvh_end_site": tuple(h.end_site)}
    if path is not None:
        # Resolved now: the writers' input check must not depend on a later working directory.
        meta["source"] = os.path.realpath(os.fspath(path))
    skeleton = Skeleton(h.names, h.parents, offsets, rest_r, meta=meta)
    return skeleton, Clip(Pose(t, r), fps=1.0 / frame_time)


# =====================================================================  save
def _depth_first(parents: NDArray[np.int64]) -> list[int]:
    """Joint indices in depth-first pre-order (children in index order): the BVH file order."""
    n = len(parents)
    kids: list[list[int]] = [[] for _ in range(n)]
    roots: list[int] = []
    for j in range(n):
        (roots if parents[j] < 0 else kids[int(parents[j])]).append(j)
    order: list[int] = []
    stack = roots[::-1]
    while stack:
        j = stack.pop()
        order.append(j)
        stack.extend(kids[j][::-1])
    return order


def _layout(skeleton: Skeleton, rotation_order: str) -> tuple[list[list[str]], list[bool]]:
    """Per joint the channel names and End Site flag from ``meta`` when it fits, else defaults."""
    n = skeleton.n_joints
    chans_meta = skeleton.meta.get("bvh_channels")
    ends_meta = skeleton.meta.get("bvh_end_site")
    leaf = [not skeleton.children(j) for j in range(n)]
    if isinstance(chans_meta, Sequence) and len(chans_meta) == n:
        channels = [list(c) for c in chans_meta]
    else:  # not a skeleton read from BVH: 6 channels on roots, 3 rotations elsewhere
        rot_names = [f"{a}rotation" for a in rotation_order]
        channels = [(["Xposition", "Yposition", "Zposition"] if p < 0 else []) + rot_names
                    for p in skeleton.parents]
    if isinstance(ends_meta, Sequence) and len(ends_meta) == n:
        ends = [bool(e) and leaf[j] and skeleton.parents[j] >= 0 for j, e in enumerate(ends_meta)]
    else:
        ends = [False] * n
    for j in range(n):
        if ends[j]:
            channels[j] = []
    return channels, ends


def save_bvh(
    path: PathLike,
    skeleton: Skeleton,
    clip: Clip,
    *,
    scale: float = 1.0,
    up: str = "y",
    rotation_order: str = "ZXY",
    precision: int = 6,
    overwrite: bool = True,
) -> None:
    """Write ``clip`` on ``skeleton`` as a BVH file (atomically: temp file, then rename).

    * The channel layout and End Sites come from ``skeleton.meta`` when the
      skeleton was read from BVH (so a load-save round trip keeps them), else
      roots get ``Xposition Yposition Zposition`` plus rotations and other
      joints rotations in ``rotation_order`` (intrinsic, e.g. ``"ZXY"``).
      A channel is added where the motion needs it: position channels for a
      joint whose translation leaves its rest translation, missing rotation
      axes for a joint that turns about them.  Nothing is dropped beyond
      :data:`CHANNEL_DROP_TOL`; for a skeleton read from glTF (float32 motion)
      beyond its rounding (:data:`F32_TRANSLATION_RTOL`, :data:`F32_ANGLE_TOL`),
      so that BVH -> glTF -> BVH writes the original layout (``load_gltf``
      restores it from the file, see :mod:`kinema.io.gltf.bvh_layout`).
    * ``scale`` divides lengths (the inverse of :func:`load_bvh`'s), ``up="z"``
      writes a Z-up file.
    * Values are written with ``precision`` decimals (degrees, file units).  A precision whose rounding is
      more than :data:`RESOLUTION_RTOL` of the skeleton's median bone (a skeleton in units of 1e-7 at 6
      decimals) raises :class:`kinema.SolverInputError` naming the decimals that hold it.
    * The Frame Time is the mean step of ``clip.times`` when the clip has
      them (they must be evenly spaced, see :func:`evenly_spaced`), else
      ``1 / clip.fps``.
    * Joints are written depth-first (children in index order); loading the
      file gives them back in that order.

    BVH has no scale: a skeleton or clip with non-unit scales raises
    :class:`kinema.SkeletonError`; a clip whose pose is not ``(F, J, k)``
    raises :class:`kinema.ShapeError`; a joint name BVH cannot hold (line
    breaks, braces, leading or trailing spaces, lone surrogates) raises
    :class:`kinema.SkeletonError`.  ``overwrite=False`` refuses an existing
    file, and the file the skeleton was read from (``skeleton.meta["source"]``)
    is always refused (:class:`FileExistsError`).  A ``path`` that is not a ``str`` or ``os.PathLike`` (or holds a
    NUL character), and options of the wrong type (``overwrite`` other than True or False, a ``scale`` that is not
    a number) raise :class:`kinema.SolverInputError`.
    """
    spath = check_path(path)
    check_skeleton(skeleton, "save_bvh")
    if not isinstance(clip, Clip):
        raise SolverInputError(f"save_bvh: clip must be a kinema.Clip, got a {type(clip).__name__}"
                               + (" (wrap it: Clip(pose, fps))" if isinstance(clip, Pose) else ""))
    scale = _check_scale(scale)
    up = _check_up(up)
    overwrite = check_flag(overwrite, "overwrite")  # before any work (atomic_write checks it again)
    if not isinstance(rotation_order, str) or rotation_order not in ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX"):
        raise SolverInputError("rotation_order must be an intrinsic Tait-Bryan sequence such as 'ZXY', "
                               f"got {short_repr(rotation_order)}")
    if isinstance(precision, np.ndarray) and precision.ndim == 0:
        precision = precision[()]  # a 0-d array: the number it holds
    # Any integer (numpy's too), but not a bool.
    if (not isinstance(precision, (int, np.integer)) or isinstance(precision, (bool, np.bool_))
            or not 0 <= precision <= 17):
        raise SolverInputError(f"precision must be an int in [0, 17], got {short_repr(precision)}")
    precision = int(precision)
    n = skeleton.n_joints
    pose = clip.pose
    if pose.n_joints != n:
        raise ShapeError("clip pose", f"(frames, {n}, k) for a skeleton of {n} joints", f"{pose.n_joints} joints")
    if len(pose.batch_shape) != 1:
        raise ShapeError("clip pose", "(frames, J, k) with one time dimension", str(pose.batch_shape + (n, "k")))
    for name in skeleton.names:
        if any(c in name for c in "\r\n{}") or name != name.strip():
            raise SkeletonError(f"joint {short_repr(name)} cannot be written to BVH: names may not hold line breaks "
                                "or braces, or start or end with spaces")
        try:
            name.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise SkeletonError(f"joint {short_repr(name)} cannot be written to BVH: it is not valid Unicode text "
                                f"({exc.reason} at character {exc.start})") from None
    if np.any(np.abs(skeleton.scales - 1.0) > UNIT_SCALE_TOL):
        j = int(np.nonzero(np.any(np.abs(skeleton.scales - 1.0) > UNIT_SCALE_TOL, axis=1))[0][0])
        raise SkeletonError(f"BVH has no scale: joint {short_repr(skeleton.names[j])} has rest scale "
                            f"{tuple(skeleton.scales[j])}")
    full = pose.broadcast()
    if np.any(np.abs(full.scales - 1.0) > UNIT_SCALE_TOL):
        j = int(np.nonzero(np.any(np.abs(full.scales - 1.0) > UNIT_SCALE_TOL, axis=(0, 2)))[0][0])
        raise SkeletonError(f"BVH has no scale: the clip scales joint {short_repr(skeleton.names[j])}")
    if not (np.all(np.isfinite(full.translations)) and np.all(np.isfinite(full.rotations))):
        raise SkeletonError("the clip holds NaN or inf")
    if clip.times is not None and not evenly_spaced(clip.times):
        raise SolverInputError("BVH frames are evenly spaced but this clip's times are not; "
                               "resample it first (e.g. load_gltf(..., fps=30))")
    t = full.translations
    r = rot.normalize(full.rotations)
    offsets = np.asarray(skeleton.translations, dtype=np.float64)
    if up == "z":
        back = rot.conjugate(_Z_TO_Y)
        t, r = _change_basis(back, t, r)
        offsets = rot.rotate(back, offsets)
    if scale != 1.0:
        t = t / scale
        offsets = offsets / scale

    _check_bones_kept(skeleton, offsets, precision)
    channels, ends = _layout(skeleton, rotation_order)
    n_frames = t.shape[0]
    columns: list[FloatArray] = []
    order = _depth_first(skeleton.parents)
    # A clip read from glTF went through float32: its rounding is no motion (F32_TRANSLATION_RTOL, F32_ANGLE_TOL).
    from_f32 = skeleton.meta.get("format") == "gltf"
    ang_tol = max(CHANNEL_DROP_TOL, F32_ANGLE_TOL) if from_f32 else CHANNEL_DROP_TOL
    for j in order:
        pos_tol = CHANNEL_DROP_TOL
        if from_f32:
            pos_tol = max(CHANNEL_DROP_TOL, F32_TRANSLATION_RTOL * float(np.linalg.norm(offsets[j])))
        if ends[j]:
            if not np.any(np.abs(t[:, j] - offsets[j]) > pos_tol):
                continue  # its rotation moves nothing (a leaf): dropped
            # An End Site cannot move: write it as a joint; position channels get added below.
            ends[j] = False
            channels[j] = []
        chans = channels[j]
        # position channels the motion needs
        have_pos = [c[0].upper() for c in chans if c[1:].lower() == "position"]
        need = [a for k, a in enumerate(_AXES) if np.any(np.abs(t[:, j, k] - offsets[j, k]) > pos_tol)]
        missing = [a for a in need if a not in have_pos]
        if missing:
            add_axes = [a for a in _AXES if a in have_pos or a in missing]
            chans = [c for c in chans if c[1:].lower() != "position"]
            chans[0:0] = [f"{a}position" for a in add_axes]
        # rotation channels the motion needs
        rot_axes = "".join(c[0].upper() for c in chans if c[1:].lower() == "rotation")
        seq = _padded_sequence(rot_axes, rotation_order)
        angles = rot.as_euler(r[:, j], seq, degrees=True)  # (F, 3)
        if 0 < len(rot_axes) < 3:
            angles = _prefer_dropped_zero(angles, len(rot_axes))
            # Frames the kept axes reproduce (to ang_tol) get their fit, dropped angles exactly 0: what is left
            # non-zero needs its channel.
            angles = _refit_kept(angles, r[:, j], seq, len(rot_axes), ang_tol)
        extra = [seq[k] for k in range(len(rot_axes), 3) if np.any(np.abs(angles[:, k]) > CHANNEL_DROP_TOL)]
        if extra:
            # append the needed axes in sequence order, so the channel order stays seq's prefix
            upto = max(seq.index(a) for a in extra) + 1
            chans = chans + [f"{a}rotation" for a in seq[len(rot_axes):upto]]
        channels[j] = chans
        for c in chans:
            axis = _AXES.index(c[0].upper())
            if c[1:].lower() == "position":
                columns.append(t[:, j, axis])
            else:
                columns.append(angles[:, seq.index(c[0].upper())])
    values = np.stack(columns, axis=1) if columns else np.zeros((n_frames, 0))

    header = _hierarchy_text(skeleton, order, channels, ends, offsets, precision)
    # The shortest digits that read back as the same float64 (9 significant digits gave a clip read from
    # "Frame Time: 0.00833333333333333" 120.000000048 fps after a save)
    header += f"MOTION\nFrames: {n_frames}\nFrame Time: {_frame_time(clip)!r}\n"
    motion = _motion_bytes(values, precision)
    with atomic_write(spath, mode="wb", overwrite=overwrite, inputs=source_files(skeleton.meta)) as f:
        f.write(header.encode("utf-8"))
        f.write(motion)


def evenly_spaced(times: NDArray[np.float64]) -> bool:
    """Whether frame times ``(F,)`` are evenly spaced to within :data:`EVEN_FRAMES_RTOL` (fewer than 3 always are)."""
    t = np.asarray(times, dtype=np.float64)
    if t.size < 3:
        return True
    steps = np.diff(t)
    return bool(np.max(np.abs(steps - steps.mean())) <= EVEN_FRAMES_RTOL * np.max(np.abs(t)))


def _frame_time(clip: Clip) -> float:
    """Seconds per BVH frame: the mean step of ``clip.times`` when it has them (two frames or more), else
    ``1 / clip.fps`` (a clip's ``fps`` need not match its times)."""
    if clip.times is not None and clip.n_frames >= 2:
        return float(clip.times[-1] - clip.times[0]) / (clip.n_frames - 1)
    return 1.0 / float(clip.fps)


def _prefer_dropped_zero(angles: FloatArray, n_kept: int) -> FloatArray:
    """Per frame, the Tait-Bryan branch whose angles after the first ``n_kept`` are zero, if either is.

    Every rotation has two Tait-Bryan angle triples, ``(a, b, c)`` and
    ``(a + 180, 180 - b, c + 180)``; :func:`~kinema.rotation.as_euler` returns
    the one with ``|b| <= 90``.  A joint with channels for only the first one
    or two axes needs the other when ``|b| > 90`` (e.g. a file's
    ``Zrotation Xrotation`` with X at 120 degrees).
    """
    alt = np.stack([angles[:, 0] + 180.0, 180.0 - angles[:, 1], angles[:, 2] + 180.0], axis=1)
    alt = (alt + 180.0) % 360.0 - 180.0  # wrap to [-180, 180)
    bad = np.any(np.abs(angles[:, n_kept:]) > CHANNEL_DROP_TOL, axis=1)
    alt_ok = np.all(np.abs(alt[:, n_kept:]) <= CHANNEL_DROP_TOL, axis=1)
    use = bad & alt_ok
    if np.any(use):
        angles = angles.copy()
        angles[use] = alt[use]
    return angles


#: Intrinsic sequences ``ABC`` whose axes are in cyclic order: there ``R_B(b)`` turns ``e_C`` towards ``+e_A``.
_CYCLIC = ("XYZ", "YZX", "ZXY")


def _refit_kept(angles: FloatArray, q: FloatArray, seq: str, n_kept: int, tol: float) -> FloatArray:
    """``angles`` with the frames whose dropped angles (after the first ``n_kept``) are not zero (beyond
    :data:`CHANNEL_DROP_TOL`) replaced by a fit of the kept axes alone, where that fit reproduces ``q`` to
    within ``tol`` degrees (so a frame written without the dropped axes is off by the fit's residual only,
    never by a whole dropped angle up to ``tol``).

    Near gimbal lock (middle angle near +-90 degrees) :func:`~kinema.rotation.as_euler` splits a rotation
    between the first and last axis as rounding decides: a rotation the kept axes hold exactly can come back
    with a dropped angle far from zero (every float32 rotation of a glTF file within ~0.4 degrees of the lock
    does).  Fitting the kept axes with the dropped ones at zero does not depend on that split:

    * one kept axis ``A``: ``a`` is the angle of ``q`` about ``A``;
    * two, ``A`` then ``B``: ``R_A(a) R_B(b)`` must take ``e_C`` to ``v = q e_C``; ``R_A`` keeps the ``e_A``
      component, ``R_B(b) e_C = cos(b) e_C +- sin(b) e_A``, so ``b = asin(+-v_A)`` or ``180 - b``, and ``a`` is
      the angle of ``q R_B(b)^-1`` about ``A``; of the two the one nearer ``q``.
    """
    off = np.nonzero(np.any(np.abs(angles[:, n_kept:]) > CHANNEL_DROP_TOL, axis=1))[0]
    if off.size == 0:
        return angles
    qf = q[off]
    ia = _AXES.index(seq[0])
    e = np.eye(3)
    cands: list[FloatArray] = []
    if n_kept == 1:
        cands.append(np.stack([2.0 * np.arctan2(qf[:, ia], qf[:, 3]), np.zeros(off.size), np.zeros(off.size)], 1))
    else:
        ib, ic = _AXES.index(seq[1]), _AXES.index(seq[2])
        sign = 1.0 if seq in _CYCLIC else -1.0
        v = rot.rotate(qf, e[ic])
        b1 = np.arcsin(np.clip(sign * v[:, ia], -1.0, 1.0))
        for b in (b1, math.pi - b1):
            p = rot.multiply(qf, rot.conjugate(rot.from_axis_angle(e[ib], b)))
            cands.append(np.stack([2.0 * np.arctan2(p[:, ia], p[:, 3]), b, np.zeros(off.size)], 1))
    fits = [(c, rot.angle_between(qf, rot.from_euler(seq, c))) for c in cands]
    best, residual = fits[0]
    for c, res in fits[1:]:
        better = res < residual
        best = np.where(better[:, None], c, best)
        residual = np.minimum(res, residual)
    best = (np.degrees(best) + 180.0) % 360.0 - 180.0  # wrap to [-180, 180)
    ok = np.degrees(residual) <= tol
    if not np.any(ok):
        return angles
    angles = angles.copy()
    angles[off[ok]] = best[ok]
    return angles


def _check_bones_kept(skeleton: Skeleton, offsets: FloatArray, precision: int) -> None:
    """:class:`kinema.SolverInputError` when ``precision`` decimals are coarser than :data:`RESOLUTION_RTOL` of
    the skeleton's median bone (``offsets (J, 3)``, file units): the file would lose its shape (``--scale 1e-7``
    wrote a centimetre skeleton's hip OFFSET ``1e-8 1.9e-7 1.05e-6`` as ``0.000000 0.000000 0.000001``).  The
    message says how many decimals keep it.  The median, not the shortest bone: a bone of float32 noise length
    (a joint on its parent) may round to nothing."""
    lengths = np.linalg.norm(offsets, axis=1)
    lengths = lengths[lengths > 0.0]
    if lengths.size == 0:
        return
    typical = float(np.median(lengths))
    resolution = 0.5 * 10.0**-precision  # the largest rounding of a written value
    if resolution <= RESOLUTION_RTOL * typical:
        return
    needed = min(17, math.ceil(-math.log10(2.0 * RESOLUTION_RTOL * typical)))
    raise SolverInputError(
        f"precision={precision} writes lengths to within {resolution:.1g}, too coarse for this skeleton, whose "
        f"median bone is {typical:.3g} long: write {needed} decimals (precision={needed}) or in larger units "
        "(scale=)")


def _hierarchy_text(skeleton: Skeleton, order: list[int], channels: list[list[str]], ends: list[bool],
                    offsets: FloatArray, precision: int) -> str:
    out = ["HIERARCHY\n"]
    depth: dict[int, int] = {}
    open_stack: list[int] = []  # joints whose block is open

    def close_to(level: int) -> None:
        while len(open_stack) > level:
            open_stack.pop()
            out.append("\t" * min(len(open_stack), MAX_INDENT) + "}\n")

    for j in order:
        p = int(skeleton.parents[j])
        d = 0 if p < 0 else depth[p] + 1
        depth[j] = d
        close_to(d)
        ind = "\t" * min(d, MAX_INDENT)
        if ends[j]:
            out.append(f"{ind}End Site\n")
        else:
            out.append(f"{ind}{'ROOT' if p < 0 else 'JOINT'} {skeleton.names[j]}\n")
        out.append(f"{ind}{{\n")
        x, y, z = (f"{v:.{precision}f}" for v in offsets[j])
        out.append(f"{ind}\tOFFSET {x} {y} {z}\n")
        if not ends[j]:
            out.append(f"{ind}\tCHANNELS {len(channels[j])}{''.join(' ' + c for c in channels[j])}\n")
        open_stack.append(j)
    close_to(0)
    return "".join(out)


def _motion_bytes(values: FloatArray, precision: int) -> bytes:
    """The MOTION lines of ``values`` ``(F, C)`` with ``precision`` decimals, as ASCII bytes.

    Rounds ``|x| * 10**precision`` half to even (the product may differ from
    the exact decimal by one ulp, so a value within one ulp of a tie can end
    one unit of the last decimal away from ``'%.*f' % x``; both are within the
    text precision).  Values too large for exact integer digits go through
    Python's ``%`` formatting instead.
    """
    n_frames, n_ch = values.shape
    if n_ch == 0:
        return b"\n" * n_frames
    with np.errstate(over="ignore"):  # a product beyond float64 is inf, which takes the exact path below
        scaled = np.rint(np.abs(values) * 10.0**precision)
    biggest = float(scaled.max()) if scaled.size else 0.0
    if biggest >= MAX_EXACT_DIGITS:
        row = " ".join([f"%.{precision}f"] * n_ch) + "\n"
        clean = values + 0.0  # -0.0 + 0.0 is +0.0: no "-0.000000" from a negative zero
        return ((row * n_frames) % tuple(clean.ravel().tolist())).encode("ascii")
    from .._kernels._tier import kernels

    kb = kernels("bvh")

    width = max(len(str(int(biggest))), precision + 1) + 3  # sign, point, separator
    out = np.empty(n_frames * (n_ch * width + 1), dtype=np.uint8)
    used = kb.format_fixed(scaled.astype(np.int64), np.signbit(values), precision, out)
    return out[:used].tobytes()
