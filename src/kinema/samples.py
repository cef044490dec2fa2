"""Bundled sample data: the DeepMimic humanoid and its walk and run clips.

The files live in ``kinema/data/deepmimic/`` with their attribution
(``SOURCES.md``, ``LICENSE.pybullet-zlib.txt``: zlib, from pybullet; the
humanoid and clips come from DeepMimic, X. B. Peng et al.).

* :func:`humanoid` returns the 15-joint skeleton parsed from
  ``humanoid.urdf``: one joint per URDF joint (``root``, ``chest``, ``neck``,
  ``right_hip`` ... ``left_wrist``), rest translations from the joint origins.
  ``humanoid(hands=True)`` adds five three-joint fingers (and a tip marker
  each) to both wrists, see :data:`HAND_PROPORTIONS` and ``meta["hands"]``.
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
from ._validate import check_flag
from .errors import FileFormatError, SolverInputError
from .pose import Clip, Pose
from .skeleton import Skeleton

__all__ = ["URDF_SCALE", "CLIP_NAMES", "FINGER_NAMES", "HAND_PROPORTIONS", "humanoid", "clip", "save_sample_bvh",
           "data_path"]

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


#: The five fingers of :func:`humanoid` ``(hands=True)``, thumb first.
FINGER_NAMES = ("thumb", "index", "middle", "ring", "pinky")

#: Hand proportions of :func:`humanoid` ``(hands=True)``, metres, in the wrist's frame at rest (which is the
#: world frame: the arms hang along -Y, the character faces +X).  Per finger: the first joint's offset from
#: the wrist for the **right** hand (+X is the thumb side, -Y the finger direction, -Z the palm side; the left
#: hand mirrors z), the direction the finger points at rest (unit after normalising), the three bone lengths
#: (first joint to second, second to third, third to the tip) and the spread angle (degrees, about the
#: wrist's +Z, towards the thumb) at ``spread = 1``.  An adult hand: 0.19 m from the wrist to the middle
#: fingertip, the knuckles 0.085-0.098 m below the wrist, the thumb rooted near the wrist in the palm's plane,
#: pointing 37 degrees off the fingers towards the thumb side.
HAND_PROPORTIONS: dict[str, dict[str, Any]] = {
    "thumb": {"offset": (0.022, -0.028, 0.0), "direction": (0.6, -0.8, 0.0),
              "lengths": (0.040, 0.032, 0.025), "spread_deg": 20.0},
    "index": {"offset": (0.032, -0.095, 0.0), "direction": (0.0, -1.0, 0.0),
              "lengths": (0.040, 0.025, 0.020), "spread_deg": 10.0},
    "middle": {"offset": (0.011, -0.098, 0.0), "direction": (0.0, -1.0, 0.0),
               "lengths": (0.045, 0.028, 0.021), "spread_deg": 0.0},
    "ring": {"offset": (-0.011, -0.094, 0.0), "direction": (0.0, -1.0, 0.0),
             "lengths": (0.042, 0.027, 0.020), "spread_deg": -8.0},
    "pinky": {"offset": (-0.031, -0.085, 0.0), "direction": (0.0, -1.0, 0.0),
              "lengths": (0.033, 0.020, 0.018), "spread_deg": -16.0},
}

#: Flexion range (degrees, from the rest pose) of each finger's three joints: fingers, then the thumb.
FINGER_FLEXION_DEG = ((0.0, 90.0), (0.0, 105.0), (0.0, 80.0))
THUMB_FLEXION_DEG = ((0.0, 50.0), (0.0, 60.0), (0.0, 80.0))
#: How a curl spreads over a finger's three joints (relative weights, see :func:`kinema.hands.finger_angles`).
FINGER_CURL_WEIGHTS = (1.0, 1.0, 0.8)

#: The palm's centre on the skin of the palm side, right hand, wrist frame (metres); the left hand mirrors z.
PALM_CENTER = (0.0, -0.055, -0.012)


def _hand_joints(side: str, wrist: int, start: int) -> tuple[list[str], list[int], list[tuple[float, float, float]],
                                                               dict[str, Any]]:
    """Names, parents, rest translations and the ``meta["hands"][side]`` entry of one hand's 20 joints.

    Joints are numbered from ``start``; each finger is ``{side}_{finger}1..3`` plus ``{side}_{finger}_tip``.
    """
    mirror = 1.0 if side == "right" else -1.0  # the left hand mirrors the right one in z
    palm_normal = np.array([0.0, 0.0, -mirror])  # out of the palm
    along = np.array([0.0, -1.0, 0.0])  # from the wrist towards the fingers
    names: list[str] = []
    parents: list[int] = []
    offsets: list[tuple[float, float, float]] = []
    fingers = []
    for finger in FINGER_NAMES:
        spec = HAND_PROPORTIONS[finger]
        direction = np.array(spec["direction"], dtype=np.float64) * (1.0, 1.0, mirror)
        direction /= np.linalg.norm(direction)
        # Flexion turns the finger towards the palm: about direction x palm normal (positive = curling in).
        hinge = np.cross(direction, palm_normal)
        hinge /= np.linalg.norm(hinge)
        base = np.array(spec["offset"]) * (1.0, 1.0, mirror)
        joint_names = [f"{side}_{finger}{k}" for k in (1, 2, 3)] + [f"{side}_{finger}_tip"]
        steps = [base] + [direction * length for length in spec["lengths"]]
        parent = wrist
        for name, step in zip(joint_names, steps, strict=True):
            names.append(name)
            parents.append(parent)
            offsets.append((float(step[0]), float(step[1]), float(step[2])))
            parent = start + len(names) - 1
        flexion = THUMB_FLEXION_DEG if finger == "thumb" else FINGER_FLEXION_DEG
        fingers.append({
            "name": finger,
            "joints": tuple(joint_names[:3]),
            "tip": joint_names[3],
            "hinge_axis": tuple(float(x) for x in hinge),
            "flexion_deg": flexion,
            "weights": FINGER_CURL_WEIGHTS,
            "spread_axis": (0.0, 0.0, 1.0),  # turning about wrist +Z moves a finger towards the thumb (+X)
            "spread_deg": float(spec["spread_deg"]),
        })
    entry = {
        "wrist": f"{side}_wrist",
        "palm_along": tuple(float(x) for x in along),
        "palm_normal": tuple(float(x) for x in palm_normal),
        "palm_center": (PALM_CENTER[0], PALM_CENTER[1], PALM_CENTER[2] * mirror),
        "fingers": tuple(fingers),
    }
    return names, parents, offsets, entry


@lru_cache(maxsize=1)
def _humanoid_with_hands() -> Skeleton:
    base = _urdf()[0]
    names = list(base.names)
    parents = [int(p) for p in base.parents]
    translations = [tuple(float(x) for x in t) for t in base.translations]
    hands = {}
    for side in ("left", "right"):
        h_names, h_parents, h_offsets, entry = _hand_joints(side, base.index(f"{side}_wrist"), len(names))
        names += h_names
        parents += h_parents
        translations += h_offsets
        hands[side] = entry
    # Finger joints are hinges about their flexion axis; the tips are fixed markers.
    axis_of = {n: f["hinge_axis"] for e in hands.values() for f in e["fingers"] for n in f["joints"]}
    added = names[base.n_joints:]
    types = tuple(base.meta["urdf_joint_type"]) + tuple("revolute" if n in axis_of else "fixed" for n in added)
    axes = tuple(base.meta["urdf_axis"]) + tuple(axis_of.get(n, (1.0, 0.0, 0.0)) for n in added)
    rotations = np.concatenate([base.rotations, np.tile([0.0, 0.0, 0.0, 1.0], (len(names) - base.n_joints, 1))])
    return Skeleton(names, parents, np.array(translations), rotations,
                    meta={"urdf_joint_type": types, "urdf_axis": axes, "hands": hands})


def humanoid(hands: bool = False) -> Skeleton:
    """The DeepMimic humanoid: 15 joints, metres, Y up, facing +X.

    ``meta["urdf_joint_type"]`` gives each joint's URDF type (``"spherical"``,
    ``"revolute"``, ``"fixed"``) and ``meta["urdf_axis"]`` its hinge axis
    (joint frame), e.g. for :class:`kinema` hinge limits on knees and elbows.

    ``hands=True`` appends 40 joints after the 15 (which keep their order, so
    :func:`clip` poses fit after padding with the rest pose): per wrist five
    fingers ``{side}_{finger}1``, ``2``, ``3`` (hinges) and a ``{side}_{finger}_tip``
    marker, ``finger`` in :data:`FINGER_NAMES`, proportions in
    :data:`HAND_PROPORTIONS`.  ``meta["hands"]["left"|"right"]`` describes each
    hand for :mod:`kinema.hands` (:meth:`kinema.hands.Hand.from_skeleton`):
    ``wrist``, the palm axes in the wrist's frame (``palm_along`` wrist to
    fingers, ``palm_normal`` out of the palm), ``palm_center`` (a point on the
    palm's skin), and per finger its ``joints``, ``tip``, ``hinge_axis`` (joint
    rest frame; positive angles curl towards the palm), ``flexion_deg`` (each
    joint's range), curl ``weights``, ``spread_axis`` and ``spread_deg``.
    ``hands`` other than True or False raises :class:`~kinema.SolverInputError`.
    """
    return _humanoid_with_hands() if check_flag(hands, "hands") else _urdf()[0]

def clip(name: str = "walk") -> Clip:
    """A DeepMimic motion on :func:`humanoid` (same joint order): ``"walk"`` (39 frames) or ``"run"``.

    Root translation and rotation come from the clip; spherical joints take
    the clip's quaternion (wxyz in the file, xyzw here) after their URDF
    origin rotation, revolute joints a rotation by the clip's angle about
    their URDF axis; fixed joints keep their rest transform.  ``fps`` is
    ``1 / frame duration`` (the last frame's zero duration is the end marker).
    Another name raises :class:`~kinema.SolverInputError` (a ``ValueError``) listing the clips.
    """
    if not isinstance(name, str) or name not in CLIP_NAMES:
        raise SolverInputError(f"unknown sample clip {name!r}; choose one of {', '.join(CLIP_NAMES)}")
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
    :class:`~kinema.SolverInputError` for a ``path`` that is not a ``str`` or ``os.PathLike`` (or holds a NUL
    character).
    """
    from .io import save_bvh
    from .io._read import check_path

    path = check_path(path)  # before the clip is built
    save_bvh(path, humanoid(), clip(name))
