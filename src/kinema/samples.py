"""Bundled sample data: the DeepMimic humanoid and its walk and run clips.

The files live in ``kinema/data/deepmimic/`` with their attribution
(``SOURCES.md``, ``LICENSE.pybullet-zlib.txt``: zlib, from pybullet; the
humanoid and clips come from DeepMimic, X. B. Peng et al.).

* :func:`humanoid` returns the 15-joint skeleton parsed from
  ``humanoid.urdf``: one joint per URDF joint (``root``, ``chest``, ``neck``,
  ``right_hip`` ... ``left_wrist``), rest translations from the joint origins.
* :func:`clip` returns a motion (``"walk"``, ``"run"``) on that skeleton.

Units and axes: metres, Y up, the character walks along +X with its right
side towards +Z.  The URDF is authored at four times human size; pybullet's
DeepMimic environment loads it with ``globalScaling=0.25`` and the clips' root
positions are in metres, so :data:`URDF_SCALE` is applied to the URDF lengths.

Knees and elbows are revolute joints about the URDF axis (+Z in the joint
frame); the clips store their angle in radians (knees negative when bent,
elbows positive), which matches that axis: a bent knee points forward.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import rotation as rot
from .errors import FileFormatError
from .pose import Clip, Pose
from .skeleton import Skeleton

__all__ = ["URDF_SCALE", "CLIP_NAMES", "humanoid", "clip", "save_sample_bvh", "data_path"]

#: Metres per URDF length unit: the ``globalScaling`` pybullet's DeepMimic
#: environment loads ``humanoid.urdf`` with (the clips are in metres).
URDF_SCALE = 0.25

#: The bundled motion clips.
CLIP_NAMES = ("walk", "run")

#: Per-frame layout of a DeepMimic clip after the frame duration and the root
#: position: joint name and the number of values (4: quaternion wxyz, 1: angle).
_CLIP_LAYOUT = (
    ("root", 4), ("chest", 4), ("neck", 4),
    ("right_hip", 4), ("right_knee", 1), ("right_ankle", 4), ("right_shoulder", 4), ("right_elbow", 1),
    ("left_hip", 4), ("left_knee", 1), ("left_ankle", 4), ("left_shoulder", 4), ("left_elbow", 1),
)

#: Frame durations count as equal (one fps, no ``times``) within this relative spread.
_EVEN_DURATION_RTOL = 1e-6

_DIR = "deepmimic"


def data_path(name: str) -> str:
    """Filesystem path of a bundled file in ``kinema/data/deepmimic`` (e.g. ``"humanoid.urdf"``)."""
    ref = resources.files("kinema").joinpath("data").joinpath(_DIR).joinpath(name)
    path = os.fspath(str(ref))
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no bundled sample file {name!r} (looked at {path})")
    return path


def _floats(text: str | None, n: int, path: str, where: str) -> NDArray[np.float64]:
    parts = (text or "").split()
    try:
        values = np.array([float(p) for p in parts])
    except ValueError:
        raise FileFormatError(path, where, f"expected {n} numbers, got {text!r}") from None
    if values.shape != (n,) or not np.all(np.isfinite(values)):
        raise FileFormatError(path, where, f"expected {n} finite numbers, got {text!r}")
    return values


@lru_cache(maxsize=1)
def _urdf() -> tuple[Skeleton, tuple[str, ...], tuple[tuple[float, float, float], ...]]:
    """Parse the URDF once: ``(skeleton, joint types, joint axes)`` in skeleton order."""
    path = data_path("humanoid.urdf")
    with open(path, "rb") as f:  # bytes: ElementTree handles the CRLF line ends and the encoding
        data = f.read()
    # The shipped file (byte for byte as in pybullet) ends in a NUL byte after
    # </robot>, which XML forbids: drop trailing NULs and blanks.
    try:
        robot = ET.fromstring(data.rstrip(b"\x00 \t\r\n"))
    except ET.ParseError as exc:
        raise FileFormatError(path, exc.position[0], f"not well-formed XML: {exc}") from None
    names: list[str] = []
    parent_links: list[str] = []
    child_links: list[str] = []
    t_origin: list[NDArray[np.float64]] = []
    r_origin: list[NDArray[np.float64]] = []
    types: list[str] = []
    axes: list[tuple[float, float, float]] = []
    for k, joint in enumerate(robot.findall("joint")):
        name = joint.get("name") or f"joint{k}"
        where = f"joint {name!r}"
        parent = joint.find("parent")
        child = joint.find("child")
        if parent is None or child is None or not parent.get("link") or not child.get("link"):
            raise FileFormatError(path, where, "a joint needs <parent link=...> and <child link=...>")
        origin = joint.find("origin")
        xyz = _floats(origin.get("xyz", "0 0 0") if origin is not None else "0 0 0", 3, path, where)
        rpy = _floats(origin.get("rpy", "0 0 0") if origin is not None else "0 0 0", 3, path, where)
        axis_el = joint.find("axis")
        axis = _floats(axis_el.get("xyz", "1 0 0") if axis_el is not None else "1 0 0", 3, path, where)
        names.append(name)
        parent_links.append(str(parent.get("link")))
        child_links.append(str(child.get("link")))
        t_origin.append(xyz * URDF_SCALE)
        # URDF rpy: roll about X, pitch about Y, yaw about Z, all fixed axes: R = Rz Ry Rx.
        r_origin.append(rot.from_euler("xyz", rpy))
        types.append(joint.get("type", "fixed"))
        axes.append((float(axis[0]), float(axis[1]), float(axis[2])))
    joint_of_child = {c: j for j, c in enumerate(child_links)}
    parents: list[int | None] = [joint_of_child.get(p) for p in parent_links]  # None: hangs off the base link
    unordered, order = Skeleton.from_unordered(names, parents, np.array(t_origin), np.array(r_origin))
    types_t = tuple(types[o] for o in order)
    axes_t = tuple(axes[o] for o in order)
    skeleton = Skeleton(unordered.names, unordered.parents, unordered.translations, unordered.rotations,
                        meta={"urdf_joint_type": types_t, "urdf_axis": axes_t})
    return skeleton, types_t, axes_t


def humanoid() -> Skeleton:
    """The DeepMimic humanoid: 15 joints, metres, Y up, facing +X.

    ``meta["urdf_joint_type"]`` gives each joint's URDF type (``"spherical"``,
    ``"revolute"``, ``"fixed"``) and ``meta["urdf_axis"]`` its hinge axis
    (joint frame), e.g. for :class:`kinema` hinge limits on knees and elbows.
    """
    return _urdf()[0]


def clip(name: str = "walk") -> Clip:
    """A DeepMimic motion on :func:`humanoid` (same joint order): ``"walk"`` (39 frames) or ``"run"``.

    Root translation and rotation come from the clip; spherical joints take
    the clip's quaternion (wxyz in the file, xyzw here) after their URDF
    origin rotation, revolute joints a rotation by the clip's angle about
    their URDF axis; fixed joints keep their rest transform.  ``fps`` is
    ``1 / frame duration`` (the last frame's zero duration is the end marker).
    """
    if name not in CLIP_NAMES:
        raise ValueError(f"unknown sample clip {name!r}; choose one of {', '.join(CLIP_NAMES)}")
    path = data_path(f"humanoid3d_{name}.txt")
    skeleton, types, axes = _urdf()
    with open(path, encoding="utf-8") as f:
        doc: Any = json.load(f)
    frames = np.asarray(doc["Frames"], dtype=np.float64)
    width = 1 + 3 + sum(n for _, n in _CLIP_LAYOUT)
    if frames.ndim != 2 or frames.shape[1] != width:
        raise FileFormatError(path, "Frames", f"expected rows of {width} numbers, got shape {frames.shape}")
    n_frames = frames.shape[0]
    t = np.broadcast_to(skeleton.translations, (n_frames,) + skeleton.translations.shape).copy()
    r = np.broadcast_to(skeleton.rotations, (n_frames,) + skeleton.rotations.shape).copy()
    t[:, skeleton.index("root")] = frames[:, 1:4]
    col = 4
    for joint, count in _CLIP_LAYOUT:
        j = skeleton.index(joint)
        values = frames[:, col:col + count]
        col += count
        expected = 4 if types[j] in ("spherical", "floating") or joint == "root" else 1
        if count != expected:
            raise FileFormatError(path, "Frames", f"joint {joint!r} is {types[j]} in the URDF but has {count} values")
        if count == 4:
            q = values[:, [1, 2, 3, 0]]  # wxyz -> xyzw
        else:
            q = rot.from_axis_angle(np.asarray(axes[j]), values[:, 0])
        r[:, j] = rot.multiply(skeleton.rotations[j], rot.normalize(q))
    durations = frames[:-1, 0] if n_frames > 1 else frames[:, 0]
    if not np.all(durations > 0):
        raise FileFormatError(path, "Frames", "frame durations must be positive")
    mean = float(durations.mean())
    times = None
    if np.max(np.abs(durations - mean)) > _EVEN_DURATION_RTOL * mean:  # uneven frames: keep their times
        times = np.concatenate([[0.0], np.cumsum(durations)])[:n_frames]
    return Clip(Pose(t, r), fps=1.0 / mean, times=times)


def save_sample_bvh(path: str | os.PathLike[str], name: str = "walk") -> None:
    """Write sample clip ``name`` on :func:`humanoid` as a BVH file (metres, Y up).

    The file has the roots' 6 channels and ``Zrotation Xrotation Yrotation``
    elsewhere (the fixed wrists included: they stay at zero); it loads back
    with :func:`kinema.io.load_bvh` to the same poses (to the text precision).
    """
    from .io import save_bvh

    save_bvh(path, humanoid(), clip(name))
