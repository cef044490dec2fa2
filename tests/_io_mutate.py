"""Helpers shared by the file tests: a small valid BVH text, the first frames of the real capture,
the leaves of a glTF JSON document, and seeded byte mutations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["GOOD_BVH", "small_capture", "json_leaves", "mutate_bytes"]

#: A valid two-joint BVH file; the comments are its 1-based line numbers (tests name them).
GOOD_BVH = (
    "HIERARCHY\n"            # 1
    "ROOT Hips\n"            # 2
    "{\n"                    # 3
    "  OFFSET 0 0 0\n"       # 4
    "  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation\n"  # 5
    "  JOINT Leg\n"          # 6
    "  {\n"                  # 7
    "    OFFSET 1 -2 0\n"    # 8
    "    CHANNELS 3 Zrotation Xrotation Yrotation\n"  # 9
    "    End Site\n"         # 10
    "    {\n"                # 11
    "      OFFSET 0 -3 0\n"  # 12
    "    }\n"                # 13
    "  }\n"                  # 14
    "}\n"                    # 15
    "MOTION\n"               # 16
    "Frames: 3\n"            # 17
    "Frame Time: 0.04\n"     # 18
    "1 2 3 4 5 6 7 8 9\n"    # 19
    "1 2 3 4 5 6 7 8 9\n"    # 20
    "1 2 3 4 5 6 7 8 9\n"    # 21
)


def small_capture(shared_data: Path, frames: int = 6) -> bytes:
    """The mocap capture ``bvh/test_mocapbank.bvh`` cut to its first ``frames`` frames (a valid file)."""
    text = (shared_data / "bvh" / "test_mocapbank.bvh").read_bytes()
    head, _, rest = text.partition(b"Frame Time:")
    time_line, _, motion = rest.partition(b"\n")
    lines = motion.splitlines(keepends=True)[:frames]
    return head.replace(b"Frames:\t455", b"Frames:\t%d" % frames) + b"Frame Time:" + time_line + b"\n" + b"".join(lines)


def json_leaves(obj: Any, prefix: tuple[Any, ...] = (), max_list: int = 20) -> list[tuple[Any, ...]]:
    """Key paths of every value in ``obj`` (itself first), skipping ``uri`` strings and lists longer than
    ``max_list`` (their elements)."""
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k != "uri":
                out += json_leaves(v, prefix + (k,), max_list)
    elif isinstance(obj, list) and len(obj) <= max_list:
        for i, v in enumerate(obj):
            out += json_leaves(v, prefix + (i,), max_list)
    return out


def mutate_bytes(rng: np.random.Generator, raw: bytes, pieces: tuple[bytes, ...] = (), n_max: int = 4) -> bytes:
    """1 to ``n_max`` random edits of ``raw``: a byte replaced, up to 8 bytes dropped, the rest cut off, or
    (with ``pieces``) one of them inserted.  Never empty (an emptied file becomes its first byte)."""
    b = bytearray(raw)
    ops = 4 if pieces else 3
    for _ in range(rng.integers(1, n_max + 1)):
        i = int(rng.integers(len(b)))
        op = rng.integers(ops)
        if op == 0:
            b[i] = int(rng.integers(256))
        elif op == 1:
            del b[i:i + int(rng.integers(1, 9))]
        elif op == 2:
            del b[i:]
        else:
            b[i:i] = pieces[int(rng.integers(len(pieces)))]
        if not b:
            b = bytearray(raw[:1])
    return bytes(b)
