"""A skeleton's BVH file layout kept in glTF node ``extras``, so that BVH -> glTF -> BVH writes the original file.

:func:`kinema.io.load_bvh` puts the file's layout in ``skeleton.meta``: ``"bvh_channels"`` (per joint, its
channel names as spelt in the file) and ``"bvh_end_site"`` (per joint, True for an End Site, which kinema
reads as a leaf joint named ``<parent>_End``); :func:`kinema.io.save_bvh` writes them back.  glTF has no
place for either, so :func:`kinema.io.save_gltf` writes them into each joint's node as
``"extras": {"kinema_bvh": {"channels": [...], "end_site": true|false}}`` (glTF 2.0 allows any JSON in
``extras`` and other tools ignore it; an absent ``"channels"`` means none, as pygltflib leaves empty arrays
out of the JSON).  :func:`kinema.io.load_gltf` restores ``meta`` from them when every joint of the skeleton
carries one; a file from another tool has none and loads as it always did.

A BVH's Frame Time is a clip's ``fps`` (``times`` None: evenly spaced frames); glTF holds only float32 key
times, from which 30.0003 fps comes back as 30.00030019.  ``save_gltf`` writes the rate of such a clip into its
animation as ``"extras": {"kinema_clip": {"fps": ...}}`` (:func:`clip_extras`) and ``load_gltf`` gives the clip
back evenly spaced at that rate when the key times are exactly the ones it wrote (:func:`read_clip_fps`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..._types import FloatArray
from ...skeleton import Skeleton
from .reader import CheckedDoc, short_repr

__all__ = ["CLIP_EXTRAS_KEY", "EXTRAS_KEY", "clip_extras", "layout_extras", "read_clip_fps", "read_layout"]

#: The key of a node's ``extras`` object that holds its joint's BVH layout.
EXTRAS_KEY = "kinema_bvh"

#: The key of an animation's ``extras`` object that holds its clip's frame rate.
CLIP_EXTRAS_KEY = "kinema_clip"


def _channel_problem(names: Sequence[str]) -> str | None:
    # Imported here: kinema.io._bvh imports this package (the decoding budget) at its top.
    from .._bvh import channel_problem

    return channel_problem(names)


def layout_extras(skeleton: Skeleton) -> list[dict[str, Any]] | None:
    """Per joint the node ``extras`` that keep the skeleton's BVH layout, or None when ``meta`` has none.

    A layout that does not fit the skeleton (another joint count, entries that are not channel lists or
    flags: meta edited by hand) is not written: :func:`read_layout` would refuse it, and
    :func:`kinema.io.save_bvh` ignores one of another length too.
    """
    chans = skeleton.meta.get("bvh_channels")
    ends = skeleton.meta.get("bvh_end_site")
    n = skeleton.n_joints
    if not (isinstance(chans, Sequence) and isinstance(ends, Sequence) and len(chans) == n and len(ends) == n):
        return None
    out: list[dict[str, Any]] = []
    for c, e in zip(chans, ends, strict=True):
        if (not isinstance(c, (list, tuple)) or not all(isinstance(x, str) for x in c)
                or _channel_problem(c) is not None or not isinstance(e, (bool, np.bool_))):
            return None
        out.append({EXTRAS_KEY: {"channels": list(c), "end_site": bool(e)}})
    return out


def read_layout(r: CheckedDoc, nodes: Sequence[int], notes: list[str]
                ) -> tuple[tuple[tuple[str, ...], ...], tuple[bool, ...]] | None:
    """``(bvh_channels, bvh_end_site)`` of the skeleton whose joints are ``nodes`` (node index per joint, in
    skeleton order), or None when no node has ``extras.kinema_bvh``.

    A layout on only some of the joints is not restored (``notes`` says so): the file was edited by a tool
    that kept the extras of some nodes only, and :func:`kinema.io.save_bvh` needs one entry per joint.
    A ``kinema_bvh`` value that is not a layout raises :class:`kinema.FileFormatError` at its JSON path:
    its channel names would be written into BVH text.
    """
    found: dict[int, tuple[tuple[str, ...], bool]] = {}
    for n in nodes:
        extras = r.item("nodes", n).get("extras")
        # extras may be any JSON value: only an object with our key is ours.
        if not isinstance(extras, Mapping) or EXTRAS_KEY not in extras:
            continue
        where = f"nodes[{n}].extras.{EXTRAS_KEY}"
        value = extras[EXTRAS_KEY]
        if not isinstance(value, dict):
            r.fail(where, f"must be an object {{'channels': [...], 'end_site': ...}}, got {short_repr(value)}")
        chans = r.array(value, "channels", where, required=False)
        for k, c in enumerate(chans):
            if not isinstance(c, str):
                r.fail(f"{where}.channels[{k}]", f"must be a string (a BVH channel name), got {short_repr(c)}")
        problem = _channel_problem(chans)
        if problem is not None:
            r.fail(f"{where}.channels", problem)
        end = value.get("end_site", False)
        if not isinstance(end, bool):
            r.fail(f"{where}.end_site", f"must be true or false, got {short_repr(end)}")
        found[n] = (tuple(chans), end)
    if not found:
        return None
    if len(found) < len(nodes):
        missing = [n for n in nodes if n not in found]
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        notes.append(f"nodes[{missing[0]}]{more}: no extras.{EXTRAS_KEY} while {len(found)} of the "
                     f"{len(nodes)} joints have one; the BVH layout is not restored")
        return None
    return tuple(found[n][0] for n in nodes), tuple(found[n][1] for n in nodes)


def clip_extras(fps: float, times: FloatArray | None) -> dict[str, Any]:
    """The ``extras`` of the animation of a clip at ``fps`` with frame ``times`` (None: evenly spaced at ``fps``,
    the only kind whose rate is kept)."""
    return {CLIP_EXTRAS_KEY: {"fps": float(fps)}} if times is None else {}


def read_clip_fps(r: CheckedDoc, anim: Mapping[str, Any], where: str, times: FloatArray,
                  notes: list[str]) -> float | None:
    """The frame rate kept in the animation ``anim`` (at JSON path ``where``) by :func:`clip_extras`, when its
    key times ``times`` (float64 from float32, the union of its channels') are exactly ``float32(k / fps)``,
    the ones ``save_gltf`` writes; else None (``notes`` says why when a rate is there but the times are not
    its own: a tool changed the keys).  A ``kinema_clip`` value that is not ``{"fps": positive number}`` raises
    :class:`kinema.FileFormatError` at its JSON path."""
    extras = anim.get("extras")
    if not isinstance(extras, Mapping) or CLIP_EXTRAS_KEY not in extras:
        return None
    at = f"{where}.extras.{CLIP_EXTRAS_KEY}"
    value = extras[CLIP_EXTRAS_KEY]
    if not isinstance(value, Mapping):
        r.fail(at, f"must be an object {{'fps': ...}}, got {short_repr(value)}")
    fps = value.get("fps")
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not (math.isfinite(fps) and fps > 0):
        r.fail(f"{at}.fps", f"must be a positive finite number, got {short_repr(fps)}")
    own = (np.arange(times.size) / float(fps)).astype(np.float32).astype(np.float64)
    if not np.array_equal(own, times):
        notes.append(f"{at}: the key times are not k / {float(fps):g} s; the clip keeps its key times")
        return None
    return float(fps)
