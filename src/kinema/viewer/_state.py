"""The viewer's server-side state: a plain Python class, no viser.

:class:`ViewerState` holds everything the browser shows: the skeleton and
its clip, the playhead, the active IK goals (one :class:`ChainGoal` per
chain) and their last diagnostics (:class:`ChainStatus`).  The viser glue
in :mod:`kinema.viewer._app` only reads it and forwards GUI events to its
methods, so every behaviour can be tested without a browser (and the
browser tests check this object, since viser's websocket lives in a web
worker the page cannot be asked about).

**Evaluation.**  ``posed = apply_goals(animated)``: the enabled goals are
the steps of one :class:`~kinema.Rig` (prepared ``kinema.TwoBone``, ``CCD``,
``FABRIK`` or ``DLS`` objects, rebuilt only when a goal's settings change).
Starting from the clip's pose at the playhead, each goal in list order
solves on the pose the previous goals left, blended with it by the goal's
weight (``q = slerp(q_in, q_solved, w)`` on the joints it turned).  The same
code bakes the whole clip for export (the frames are one batch).
"""

from __future__ import annotations

import math
import os
import re
import stat
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._types import FloatArray
from ..errors import KinemaError, SolverInputError
from ..fk import forward_kinematics
from ..limits import Limit
from ..mesh import SkinnedMesh
from ..pose import Clip, Pose
from ..rig import Rig, Step
from ..skeleton import Skeleton

__all__ = [
    "SOLVERS",
    "ChainGoal",
    "ChainStatus",
    "SkinnedMesh",
    "ViewerState",
    "available_solvers",
    "humanoid_limb_ends",
    "load_any",
]


#: Solver labels shown in the GUI and the public kinema function each one calls.
#: Only those that exist in the installed kinema are offered (:func:`available_solvers`).
SOLVERS: tuple[tuple[str, str], ...] = (
    ("two-bone", "solve_two_bone"),
    ("CCD", "solve_ccd"),
    ("FABRIK", "solve_fabrik"),
    ("DLS", "solve_dls"),
)

#: The prepared solver (a ``kinema`` class) each label builds; the viewer composes them in a Rig.
PREPARED = {"two-bone": "TwoBone", "CCD": "CCD", "FABRIK": "FABRIK", "DLS": "DLS"}

#: File extensions :func:`load_any` understands.
BVH_EXTENSIONS = (".bvh",)
GLTF_EXTENSIONS = (".gltf", ".glb")

#: Default world-distance tolerance of iterative solves, as a fraction of the chain's length.
TOLERANCE_FRACTION = 1e-4

#: Default pole offset from the chain's middle joint, as a fraction of the chain's length.
POLE_OFFSET_FRACTION = 0.5

#: Below this length (world units) a "bend direction" is treated as absent
#: (a straight chain has none) and a fallback direction is used.
BEND_EPS = 1e-9

#: Joint-name fragments of typical chain ends (listed first in the GUI).
LIMB_END_WORDS = ("hand", "wrist", "foot", "ankle", "toe")

#: Words of a humanoid's limb ends, per limb, in order of preference (a rig with both a
#: wrist and a hand below it chains to the wrist), and of the body sides.
LIMB_ENDS = {"arm": ("wrist", "hand"), "leg": ("ankle", "foot")}
SIDE_WORDS = {"right": ("right", "r"), "left": ("left", "l")}

#: The limb chains the viewer opens with on a humanoid it recognises, as in the README's
#: picture: (side, limb), each a two-bone chain ending at the wrist or ankle.
LIMB_CHAINS = (("right", "arm"), ("left", "arm"), ("right", "leg"), ("left", "leg"))

#: Bones per limb chain (upper arm and forearm, thigh and shin).
LIMB_CHAIN_BONES = 2

#: Most frames one playback step may skip (a stalled timer must not jump the clip far).
MAX_FRAMES_PER_STEP = 4


def available_solvers() -> list[str]:
    """Labels of the solvers the installed kinema provides, in :data:`SOLVERS` order."""
    import kinema

    return [label for label, func in SOLVERS if callable(getattr(kinema, func, None))]


def _solver_class(label: str) -> Any:
    """The prepared solver class (:data:`PREPARED`) behind a GUI label."""
    import kinema

    if label not in PREPARED:
        raise SolverInputError(f"unknown solver {label!r}; choose one of {[s for s, _ in SOLVERS]}")
    return getattr(kinema, PREPARED[label])


def _step_name(g: ChainGoal) -> str:
    """The name of goal ``g``'s step in :meth:`ViewerState.rig`."""
    return f"goal{g.id}"


def _name_words(name: str) -> list[str]:
    """Lower-case words of a joint name: ``"mixamorig:LeftHand"`` -> ``["left", "hand"]``,
    ``"l_wrist"`` -> ``["l", "wrist"]``, ``"LShoulder"`` -> ``["l", "shoulder"]``."""
    base = re.split(r"[:|]", name)[-1]
    return [w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", base)]


def humanoid_limb_ends(skeleton: Skeleton) -> list[str]:
    """End joints of the four limb chains of :data:`LIMB_CHAINS` (right arm, left arm, right leg,
    left leg), or ``[]`` when ``skeleton`` is not a humanoid this recognises.

    A limb end is a joint whose name is exactly a side word and a limb-end
    word (``left_wrist``, ``LeftWrist``, ``l_hand``, ``RightAnkle``,
    ``mixamorig:LeftFoot``; not ``LeftHandIndex1``), with at least
    :data:`LIMB_CHAIN_BONES` ancestors.  All four must be found, and distinct.
    """
    words = [_name_words(n) for n in skeleton.names]
    ends: list[str] = []
    for side, limb in LIMB_CHAINS:
        found = None
        for end_word in LIMB_ENDS[limb]:
            for j, w in enumerate(words):
                if (len(w) == 2 and end_word in w and any(s in w for s in SIDE_WORDS[side])
                        and len(skeleton.ancestors(j)) >= LIMB_CHAIN_BONES):
                    found = skeleton.names[j]
                    break
            if found is not None:
                break
        if found is None:
            return []
        ends.append(found)
    return ends if len(set(ends)) == len(ends) else []


@dataclass
class ChainStatus:
    """Diagnostics of one goal after the last evaluation.

    ``error`` is the world distance from the end joint to the target in the
    final pose (after every goal and the weight), ``reached`` whether it is
    within the goal's tolerance; ``iterations`` and ``limits_hit`` come from
    the solver; ``message`` holds a solver error (the chain is then left as
    animated).
    """

    error: float = math.nan
    reached: bool = False
    iterations: int = 0
    limits_hit: int = 0
    message: str = ""


@dataclass
class ChainGoal:
    """One IK goal: a chain ending at ``end`` with ``length`` bones.

    * ``joints``: ``(length + 1,)`` joint indices, root first.
    * ``target`` / ``pole``: ``(3,)`` world positions (the pole is used when ``use_pole``).
    * ``weight``: in [0, 1], blend of the solved chain over the input pose.
    """

    id: int
    end: int
    length: int
    joints: NDArray[np.int64]
    solver: str
    target: FloatArray
    pole: FloatArray
    use_pole: bool = True
    weight: float = 1.0
    enabled: bool = True
    tolerance: float = 1e-3
    status: ChainStatus = field(default_factory=ChainStatus)


@dataclass(frozen=True)
class _RigCache:
    """The last :meth:`ViewerState.rig`: valid while the skeleton, the limits and ``key`` are unchanged."""

    skeleton: Skeleton
    limits: Mapping[int, Limit]
    key: tuple[Any, ...]
    rig: Rig | None
    failed: dict[int, str]


def _is_gltf(path: str) -> bool:
    return path.lower().endswith(GLTF_EXTENSIONS)


def load_any(path: str | os.PathLike[str]) -> tuple[Skeleton, Clip | None, SkinnedMesh | None]:
    """Read a BVH or glTF/GLB file with :mod:`kinema.io`; returns ``(skeleton, clip, mesh)``.

    ``clip`` is None for a file without animation, ``mesh`` None unless the
    glTF loader hands back a skinned mesh.  Errors are the loaders' own
    (:class:`kinema.FileFormatError` for a bad file), plus
    :class:`FileNotFoundError` and a :class:`kinema.FileFormatError` for an
    unknown extension or a path that is not a regular file (a FIFO, a device,
    a folder), which is refused before it is opened.
    """
    from ..errors import FileFormatError

    p = os.fspath(path)
    if not os.path.exists(p):
        raise FileNotFoundError(f"no such file: {p}")
    if not stat.S_ISREG(os.stat(p).st_mode):  # a FIFO or device would block or never end
        raise FileFormatError(p, None, "not a regular file")
    low = p.lower()
    import kinema.io as kio

    if low.endswith(BVH_EXTENSIONS):
        skel, clip = kio.load_bvh(p)
        return skel, clip, None
    if low.endswith(GLTF_EXTENSIONS):
        loaded = kio.load_gltf(p)
        return _unpack_gltf(loaded)
    raise FileFormatError(p, None, "unknown file type (expected .bvh, .gltf or .glb)")


def _unpack_gltf(asset: Any) -> tuple[Skeleton, Clip | None, SkinnedMesh | None]:
    """Skeleton, first clip and skinned mesh (:class:`kinema.mesh.SkinnedMesh`) of a :class:`kinema.io.GltfAsset`."""
    skel: Skeleton = asset.skeleton
    clips = dict(getattr(asset, "clips", {}) or {})
    clip = next(iter(clips.values())) if clips else None
    return skel, clip, getattr(asset, "mesh", None)


def load_sample() -> tuple[Skeleton, Clip | None, SkinnedMesh | None, Mapping[Any, Limit] | None]:
    """The bundled sample (``kinema.samples``): humanoid, walk clip and its limits when provided."""
    from .. import samples  # type: ignore[attr-defined]

    skel = samples.humanoid()
    clip = samples.clip("walk")
    limits_fn = getattr(samples, "humanoid_limits", None)
    limits = limits_fn() if callable(limits_fn) else urdf_hinge_limits(skel)
    return skel, clip, None, limits


#: Hinge ranges (radians) of the sample humanoid's revolute joints, as in its URDF
#: (``<limit lower= upper=>``): knees bend negative, elbows positive.
SAMPLE_HINGE_RANGES = {"knee": (-3.14, 0.0), "elbow": (0.0, 3.14)}


def urdf_hinge_limits(skeleton: Skeleton) -> dict[str, Limit]:
    """Hinge limits for the revolute joints of a URDF skeleton (``meta["urdf_joint_type"]``, ``["urdf_axis"]``).

    The range comes from :data:`SAMPLE_HINGE_RANGES` by joint-name fragment;
    revolute joints whose name matches none are left free.
    """
    from ..limits import Hinge

    types = skeleton.meta.get("urdf_joint_type")
    axes = skeleton.meta.get("urdf_axis")
    out: dict[str, Limit] = {}
    if not types or not axes:
        return out
    for name, kind, axis in zip(skeleton.names, types, axes, strict=True):
        if kind != "revolute":
            continue
        for frag, (lo, hi) in SAMPLE_HINGE_RANGES.items():
            if frag in name:
                out[name] = Hinge(tuple(axis), lo, hi)
    return out


def _frame_of(a: FloatArray, frame: int, tail: int) -> FloatArray:
    """Row ``frame`` of a clip array ``(frames, J, tail)`` or the shared ``(J, tail)`` array."""
    return a[frame] if a.ndim == tail + 1 else a


class ViewerState:
    """Everything the viewer shows, independent of any browser.

    Create with a skeleton (and optionally a clip, a skinned mesh and joint
    limits ``{joint: Limit}``), or :meth:`from_file` / :meth:`from_sample`.
    All methods are thread-safe (GUI callbacks run on viser's thread pool);
    ``lock`` may be held by callers that read several attributes at once.

    Attributes read by the viewer and tests: ``skeleton``, ``clip``,
    ``mesh``, ``limits``, ``frame``, ``playing``, ``speed``, ``goals``,
    ``posed`` (the last evaluated :class:`Pose`, ``(J, ...)``),
    ``positions`` / ``rotations`` (its world joint positions ``(J, 3)`` and
    rotations ``(J, 4)``), ``messages`` (errors and notices, newest last),
    ``source`` (path of the loaded file, None for the sample),
    ``solve_count`` (evaluations that ran at least one solver).
    """

    def __init__(
        self,
        skeleton: Skeleton,
        clip: Clip | None = None,
        *,
        mesh: SkinnedMesh | None = None,
        limits: Mapping[Any, Limit] | None = None,
        source: str | None = None,
        iterations: int = 30,
    ) -> None:
        self.lock = threading.RLock()
        self.messages: list[str] = []
        self.iterations = int(iterations)
        self.use_limits = True
        self.solve_count = 0
        self._next_id = 0
        self._rig_cache: _RigCache | None = None
        self._set_content(skeleton, clip, mesh, limits, source)

    # ---------------------------------------------------------------- loading
    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **kwargs: Any) -> ViewerState:
        """State for a BVH or glTF/GLB file (errors as in :func:`load_any`)."""
        skel, clip, mesh = load_any(path)
        return cls(skel, clip, mesh=mesh, source=os.fspath(path), **kwargs)

    @classmethod
    def from_sample(cls, **kwargs: Any) -> ViewerState:
        """State for the bundled sample humanoid and its walk clip."""
        skel, clip, mesh, limits = load_sample()
        kwargs.setdefault("limits", limits)
        return cls(skel, clip, mesh=mesh, **kwargs)

    def load(self, path: str | os.PathLike[str]) -> str | None:
        """Replace the content by a file; returns None on success or the error message.

        A bad file leaves the current content untouched and appends the
        message to ``messages`` (the viewer shows it in the page and prints
        it in the terminal).
        """
        try:
            skel, clip, mesh = load_any(path)
            with self.lock:  # refused content leaves the old one in place (see _set_content)
                self._set_content(skel, clip, mesh, None, os.fspath(path))
        except (KinemaError, OSError, ValueError) as exc:
            msg = f"could not open {os.fspath(path)}: {exc}"
            self.note(msg)
            return msg
        self.note(f"opened {os.fspath(path)}: {skel.n_joints} joints, "
                  f"{0 if clip is None else clip.n_frames} frames")
        return None

    def note(self, message: str) -> None:
        with self.lock:
            self.messages.append(message)
            del self.messages[:-50]

    #: What :meth:`_set_content` replaces (and puts back when the new content cannot be shown).
    _CONTENT = ("skeleton", "clip", "mesh", "source", "limits", "frame", "time", "playing", "speed", "goals",
                "version", "posed", "positions", "rotations")

    def _set_content(self, skeleton: Skeleton, clip: Clip | None, mesh: SkinnedMesh | None,
                     limits: Mapping[Any, Limit] | None, source: str | None) -> None:
        """Show new content, atomically: when it cannot be evaluated, the old content is put back and the
        error raised (a half-replaced state would fail every later action)."""
        if clip is not None and clip.pose.n_joints != skeleton.n_joints:
            raise SolverInputError(f"clip has {clip.pose.n_joints} joints, skeleton {skeleton.n_joints}")
        if clip is not None and clip.n_frames == 0:
            # a valid file may hold a motion of 0 frames: no pose to play, so show the rest pose, as for a
            # file without animation (frame 0 of an empty clip does not exist)
            clip = None
        with self.lock:
            old = {name: self.__dict__[name] for name in self._CONTENT if name in self.__dict__}
            try:
                self.skeleton = skeleton
                self.clip = clip
                self.mesh = mesh
                self.source = source
                self.limits: dict[int, Limit] = {}
                for key, lim in (limits or {}).items():
                    self.limits[int(skeleton.indices([key])[0])] = lim
                self.frame = 0
                self.time = 0.0
                self.playing = False
                self.speed = 1.0
                self.goals: list[ChainGoal] = []
                self.version = old.get("version", 0) + 1  # bumps when the skeleton changes
                self.evaluate()
            except BaseException:
                for name in self._CONTENT:
                    self.__dict__.pop(name, None)
                self.__dict__.update(old)
                raise

    # ---------------------------------------------------------------- timeline
    @property
    def n_frames(self) -> int:
        return 0 if self.clip is None else self.clip.n_frames

    @property
    def fps(self) -> float:
        return 30.0 if self.clip is None else float(self.clip.fps)

    def frame_time(self, frame: int) -> float:
        """Seconds from the clip's start to ``frame``."""
        if self.clip is None:
            return 0.0
        if self.clip.times is not None:
            return float(self.clip.times[frame] - self.clip.times[0])
        return frame / float(self.clip.fps)

    def set_frame(self, frame: int) -> None:
        """Move the playhead to ``frame`` (clamped to the clip) and re-evaluate."""
        with self.lock:
            n = self.n_frames
            self.frame = 0 if n == 0 else int(np.clip(int(frame), 0, n - 1))
            self.time = self.frame_time(self.frame)
            self.evaluate()

    def advance(self, dt: float) -> int:
        """Play forward by ``dt`` seconds times ``speed`` (looping); returns the new frame.

        The clip's time is kept in seconds so uneven frame times (glTF)
        play at their own pace; one call moves at most
        :data:`MAX_FRAMES_PER_STEP` frames' worth of time (a stalled timer
        must not jump the clip far).
        """
        with self.lock:
            n = self.n_frames
            if n <= 1 or self.clip is None:
                return self.frame
            duration = self.clip.duration
            # a stalled timer (slow solve, suspended laptop) must not jump the clip far
            step = min(max(0.0, float(dt)) * self.speed, MAX_FRAMES_PER_STEP / self.fps)
            t = self.time + step
            if duration > 0.0:
                t = math.fmod(t, duration + 1.0 / self.fps)  # loop, with the last frame held one frame
            if self.clip.times is not None:
                f = int(np.searchsorted(self.clip.times - self.clip.times[0], t, side="right")) - 1
            else:
                f = int(math.floor(t * self.clip.fps + 1e-9))
            f = min(max(f, 0), n - 1)
            self.time = t
            if f != self.frame:
                self.frame = f
                self.evaluate()
            return self.frame

    def animated_pose(self, frame: int | None = None) -> Pose:
        """The clip's pose at ``frame`` (default: the playhead), ``(J, ...)``; the rest pose without a clip."""
        if self.clip is None:
            return self.skeleton.rest_pose()
        f = self.frame if frame is None else frame
        p = self.clip.pose
        return Pose(_frame_of(p.translations, f, 2).copy(), _frame_of(p.rotations, f, 2).copy(),
                    _frame_of(p.scales, f, 2).copy())

    # ---------------------------------------------------------------- chains
    def chain_joints(self, end: int | str, length: int) -> NDArray[np.int64]:
        """Joints of the chain of ``length`` bones ending at ``end``, root first.

        Raises :class:`kinema.SolverInputError` when ``end`` has fewer than
        ``length`` ancestors.
        """
        e = int(self.skeleton.indices([end])[0])
        n = int(length)
        if n < 1:
            raise SolverInputError(f"a chain needs at least one bone, got length {length}")
        anc = self.skeleton.ancestors(e)
        if len(anc) < n:
            raise SolverInputError(f"joint {self.skeleton.names[e]!r} has only {len(anc)} ancestors; "
                                   f"a chain of {n} bones cannot end there")
        return np.asarray([*reversed(anc[:n]), e], dtype=np.int64)

    def chain_candidates(self, min_length: int = 2) -> list[str]:
        """Joint names that can end a chain of ``min_length`` bones, leaves (hands, feet) first."""
        names = self.skeleton.names
        ok = [j for j in range(len(names)) if len(self.skeleton.ancestors(j)) >= min_length]
        def rank(j: int) -> tuple[int, int]:
            low = names[j].lower()
            limb = any(k in low for k in LIMB_END_WORDS)
            return (0 if limb else 1 if not self.skeleton.children(j) else 2, j)

        return [names[j] for j in sorted(ok, key=rank)]

    def add_limb_chains(self) -> list[ChainGoal]:
        """Add the four limb chains of a recognised humanoid (:func:`humanoid_limb_ends`); returns them.

        Each is a :data:`LIMB_CHAIN_BONES`-bone chain with the default solver,
        its target on the end joint (nothing moves until a target is
        dragged).  A rig that is not recognised gets none (``[]``).
        """
        with self.lock:
            return [self.add_chain(end, LIMB_CHAIN_BONES) for end in humanoid_limb_ends(self.skeleton)]

    def default_solver(self, length: int) -> str:
        solvers = available_solvers()
        if not solvers:
            raise SolverInputError("no IK solver is available in this kinema")
        if length == 2 and "two-bone" in solvers:
            return "two-bone"
        for s in ("FABRIK", "CCD", "DLS"):
            if s in solvers:
                return s
        return solvers[0]

    def add_chain(self, end: int | str, length: int = 2, solver: str | None = None, *,
                  target: ArrayLike | None = None, pole: ArrayLike | None = None,
                  weight: float = 1.0) -> ChainGoal:
        """Add a goal for the chain ending at ``end``; returns it.

        The target starts on the end joint's current world position and the
        pole half a chain length out from the middle joint along the current
        bend (so adding a goal does not move anything until it is dragged).
        """
        with self.lock:
            joints = self.chain_joints(end, length)
            label = self.default_solver(int(length)) if solver is None else solver
            _solver_class(label)  # raise now for an unknown or missing solver
            pos = self.positions
            goal = ChainGoal(
                id=self._next_id,
                end=int(joints[-1]),
                length=int(length),
                joints=joints,
                solver=label,
                target=pos[joints[-1]].copy() if target is None else _vec3(target, "target"),
                pole=self._default_pole(joints) if pole is None else _vec3(pole, "pole"),
                weight=_weight(weight),
                tolerance=TOLERANCE_FRACTION * max(self._chain_length(joints), BEND_EPS),
            )
            self._next_id += 1
            self.goals.append(goal)
            self.evaluate()
            return goal

    def _chain_length(self, joints: NDArray[np.int64]) -> float:
        p = self.positions[joints]
        return float(np.sum(np.linalg.norm(np.diff(p, axis=0), axis=1)))

    def _default_pole(self, joints: NDArray[np.int64]) -> FloatArray:
        """Middle joint pushed out along the chain's current bend (a fallback direction when straight)."""
        p = self.positions[joints]
        a, c = p[0], p[-1]
        mid = p[len(p) // 2]
        axis = c - a
        la = float(np.linalg.norm(axis))
        off = mid - a
        if la > BEND_EPS:
            axis = axis / la
            off = off - np.dot(off, axis) * axis
        lo = float(np.linalg.norm(off))
        if lo <= BEND_EPS:  # straight chain: no bend to follow; pick any direction perpendicular to it
            ref = np.array([0.0, 0.0, 1.0]) if abs(axis[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
            off = np.cross(axis, ref) if la > BEND_EPS else ref
            lo = float(np.linalg.norm(off))
        length = max(self._chain_length(joints), BEND_EPS)
        return mid + off / lo * POLE_OFFSET_FRACTION * length

    def goal(self, goal_id: int) -> ChainGoal:
        for g in self.goals:
            if g.id == goal_id:
                return g
        raise KeyError(f"no chain with id {goal_id}")

    def remove_chain(self, goal_id: int) -> None:
        with self.lock:
            self.goals.remove(self.goal(goal_id))
            self.evaluate()

    def update_chain(self, goal_id: int, **changes: Any) -> ChainGoal:
        """Change a goal's ``target``, ``pole``, ``use_pole``, ``weight``, ``enabled``, ``solver``,
        ``end`` or ``length``, then re-solve.  Returns the goal."""
        with self.lock:
            g = self.goal(goal_id)
            if "end" in changes or "length" in changes:
                end = changes.pop("end", g.end)
                length = int(changes.pop("length", g.length))
                joints = self.chain_joints(end, length)
                g.end, g.length, g.joints = int(joints[-1]), length, joints
                g.tolerance = TOLERANCE_FRACTION * max(self._chain_length(joints), BEND_EPS)
                if "target" not in changes:
                    g.target = self.positions[g.end].copy()
                if "pole" not in changes:
                    g.pole = self._default_pole(joints)
            for key, value in changes.items():
                if key == "target":
                    g.target = _vec3(value, "target")
                elif key == "pole":
                    g.pole = _vec3(value, "pole")
                elif key == "weight":
                    g.weight = _weight(value)
                elif key == "solver":
                    _solver_class(value)
                    g.solver = str(value)
                elif key in ("use_pole", "enabled"):
                    setattr(g, key, bool(value))
                else:
                    raise TypeError(f"unknown chain setting {key!r}")
            self.evaluate()
            return g

    def set_target(self, goal_id: int, target: ArrayLike) -> ChainGoal:
        return self.update_chain(goal_id, target=target)

    def set_pole(self, goal_id: int, pole: ArrayLike) -> ChainGoal:
        return self.update_chain(goal_id, pole=pole)

    # ---------------------------------------------------------------- solving
    def evaluate(self) -> Pose:
        """Re-pose the playhead frame with every enabled goal; updates ``posed``, ``positions``, statuses."""
        with self.lock:
            pose = self.apply_goals(self.animated_pose(), record=True)
            fk = forward_kinematics(self.skeleton, pose)
            self.posed = pose
            self.positions = fk.positions
            self.rotations = fk.rotations
            for g in self.goals:
                if g.enabled:
                    err = float(np.linalg.norm(self.positions[g.end] - g.target))
                    g.status.error = err
                    g.status.reached = bool(err <= g.tolerance) and not g.status.message
            return pose

    def apply_goals(self, pose: Pose, *, record: bool = False) -> Pose:
        """``pose`` (any batch shape) with every enabled goal solved on top, weights applied.

        The goals run as one :class:`~kinema.Rig` (see :meth:`rig`).  A solver
        error leaves that chain as it was and is stored in the goal's
        ``status.message`` (when ``record``) instead of raising.
        """
        rig, failed = self.rig()
        if record:
            for g in self.goals:
                if not g.enabled:
                    g.status = ChainStatus(message="off")
                elif g.id in failed:
                    g.status = ChainStatus(message=failed[g.id])
        if rig is None:
            return pose.broadcast()
        by_step = {_step_name(g): g for g in self.goals if g.enabled and g.id not in failed}
        targets = {name: ([g.target] if g.solver == "DLS" else g.target) for name, g in by_step.items()}
        res = rig.solve(pose.broadcast(), targets, errors="skip")
        if record:
            for name, g in by_step.items():
                if name in res.errors:
                    exc = res.errors[name]
                    g.status = ChainStatus(message=f"{type(exc).__name__}: {exc}")
                else:
                    r = res.steps[name]
                    g.status = ChainStatus(iterations=int(np.max(r.iterations)),
                                           limits_hit=int(np.sum(r.limits_hit)))
            if res.steps:
                self.solve_count += 1
        return res.pose

    def rig(self) -> tuple[Rig | None, dict[int, str]]:
        """The enabled goals as one :class:`~kinema.Rig`, in list order, and the goals it could not take.

        Each goal is a step with its prepared solver and its weight, ``layer=True``
        (the viewer's goals are the user's, layered in the order they were
        added, each on the pose the earlier ones left).  Returns ``(rig, failed)``:
        ``rig`` is None when no goal is enabled; ``failed`` maps goal ids to the
        error that kept their solver from being built.  The rig is rebuilt only
        when a goal's solver, joints, pole, weight or tolerance, the iterations or
        the limits change; targets are per call.
        """
        enabled = [g for g in self.goals if g.enabled]
        key = (self.use_limits, self.iterations,
               tuple((g.id, g.solver, g.joints.tobytes(), g.use_pole, g.pole.tobytes(), g.weight, g.tolerance)
                     for g in enabled))
        cached = self._rig_cache
        # The skeleton and the limits are compared by identity (loading a file replaces both).
        if (cached is not None and cached.skeleton is self.skeleton and cached.limits is self.limits
                and cached.key == key):
            return cached.rig, cached.failed
        steps: list[Step] = []
        failed: dict[int, str] = {}
        for g in enabled:
            try:
                solver, options = self._prepared_solver(g)
            except KinemaError as exc:
                failed[g.id] = f"{type(exc).__name__}: {exc}"
                continue
            steps.append(Step(_step_name(g), solver, weight=g.weight, layer=True, options=options))
        rig = Rig(self.skeleton, steps) if steps else None
        self._rig_cache = _RigCache(self.skeleton, self.limits, key, rig, failed)
        return rig, failed

    def _prepared_solver(self, g: ChainGoal) -> tuple[Any, dict[str, Any]]:
        """``g``'s prepared solver and the options of its every ``solve`` call."""
        import kinema

        cls = _solver_class(g.solver)
        options: dict[str, Any] = {"pole": g.pole if g.use_pole else None}
        if g.solver == "two-bone":
            if g.length < 2:
                raise SolverInputError("two-bone needs a chain of at least 2 bones")
            # The end's parent is the lower (elbow/knee) joint; joints between it and the
            # chain's first joint ride along as twist bones.
            return cls(self.skeleton, (int(g.joints[0]), int(g.joints[-2]), int(g.joints[-1]))), options
        limits = self.chain_limits(g) or None
        if g.solver == "DLS":  # a goal list, not a chain: the end's position, turning the chain's other joints
            goal = kinema.PositionGoal(int(g.joints[-1]), g.target)
            return cls(self.skeleton, [goal], joints=[int(j) for j in g.joints[:-1]], iterations=self.iterations,
                       tolerance=g.tolerance, limits=limits), {}
        chain = (int(g.joints[0]), int(g.joints[-1]))
        return cls(self.skeleton, chain, iterations=self.iterations, tolerance=g.tolerance, limits=limits), options

    def warm_up(self) -> list[str]:
        """Run every available solver once on a scratch chain, so their kernels are compiled.

        The first call of a numba kernel compiles it (seconds); the viewer
        does this in the background at start so the first drag is smooth.
        Nothing in the state changes.  Returns the solvers that ran.
        """
        prepared: list[tuple[str, Any, dict[str, Any]]] = []
        with self.lock:  # a file loaded meanwhile must not mix its skeleton with this one's chain
            cands = self.chain_candidates(2)
            if not cands:  # no joint has two ancestors: no chain a solver could take
                return []
            joints = self.chain_joints(cands[0], 2)
            pose = self.animated_pose()
            target = self.positions[joints[-1]] + 0.01 * (self.positions[joints[0]] - self.positions[joints[-1]])
            pole = self._default_pole(joints)
            for label in available_solvers():
                g = ChainGoal(id=-1, end=int(joints[-1]), length=2, joints=joints, solver=label, target=target,
                              pole=pole, tolerance=1e-9)
                try:
                    solver, options = self._prepared_solver(g)
                except KinemaError:  # a solver that rejects this chain has nothing to compile
                    solver, options = None, {}
                prepared.append((label, solver, options))
        ran = []
        for label, solver, options in prepared:  # compiling happens here, outside the lock
            if solver is not None:
                try:
                    solver.solve(pose, [target] if label == "DLS" else target, **options)
                except KinemaError:  # a solve this chain rejects has compiled its kernels all the same
                    pass
            ran.append(label)
        return ran

    def chain_limits(self, g: ChainGoal) -> dict[int, Limit]:
        """The limits of ``g``'s joints that the solver gets (none when ``use_limits`` is off)."""
        if not self.use_limits:
            return {}
        return {int(j): self.limits[int(j)] for j in g.joints[:-1] if int(j) in self.limits}

    # ---------------------------------------------------------------- export
    def bake(self) -> Clip:
        """The whole clip with every enabled goal applied (one batched solve per goal)."""
        with self.lock:
            if self.clip is None:
                pose = self.skeleton.rest_pose((1,))
                fps = 30.0
                times = None
            else:
                pose = self.clip.pose.broadcast()
                fps = float(self.clip.fps)
                times = self.clip.times
            out = self.apply_goals(pose)
            return Clip(out, fps, times)

    def export(self, path: str | os.PathLike[str], fmt: str | None = None) -> Path:
        """Write the baked clip as BVH or GLB/glTF (from ``fmt`` or the extension) via the atomic writer.

        The file being viewed is never overwritten (:class:`FileExistsError`).
        Returns the written path.
        """
        from ..io._atomic import same_file

        p = Path(os.fspath(path))
        kind = (fmt or p.suffix.lstrip(".")).lower()
        if kind not in ("bvh", "glb", "gltf"):
            raise ValueError(f"export format must be bvh, glb or gltf, got {kind!r}")
        if self.source is not None and same_file(p, self.source):
            raise FileExistsError(f"refusing to overwrite the file being viewed: {p}")
        with self.lock:  # the skeleton and mesh of the baked clip (not of a file opened meanwhile)
            skeleton, mesh, clip = self.skeleton, self.mesh, self.bake()
        import kinema.io as kio

        if kind == "bvh":
            # BVH has no scale: snap glTF's float32 near-1 scales to 1 exactly, as ``kinema convert`` does
            from ..cli._files import unit_scales

            skeleton, clip = unit_scales(skeleton, clip)
            kio.save_bvh(p, skeleton, clip)
        else:
            # keep the loaded skin when there is one, else write capsule bones so the file shows something
            kio.save_gltf(p, skeleton, clip, mesh=mesh if mesh is not None else "bones")
        self.note(f"exported {clip.n_frames} frames to {p}")
        return p

    # ---------------------------------------------------------------- report
    def status_rows(self) -> list[dict[str, Any]]:
        """One dict per goal: chain, solver, error, reached, iterations, limits hit, message."""
        names = self.skeleton.names
        rows = []
        for g in self.goals:
            s = g.status
            rows.append({
                "id": g.id,
                "chain": f"{names[int(g.joints[0])]} -> {names[g.end]}",
                "solver": g.solver,
                "weight": g.weight,
                "error": s.error,
                "reached": s.reached,
                "iterations": s.iterations,
                "limits_hit": s.limits_hit,
                "message": s.message,
            })
        return rows

    def status_markdown(self) -> str:
        """The diagnostics panel as a Markdown table."""
        rows = self.status_rows()
        if not rows:
            return "No IK chains yet: pick an end joint and press **Add chain**."
        lines = ["| chain | solver | error | reached | iters | limits hit |", "|---|---|---|---|---|---|"]
        for r in rows:
            err = "-" if not math.isfinite(r["error"]) else f"{r['error']:.4g}"
            reached = "yes" if r["reached"] else "no"
            lines.append(f"| {markdown_escape(r['chain'])} | {r['solver']} | {err} | {reached} | {r['iterations']} "
                         f"| {r['limits_hit']} |")
        for r in rows:
            if r["message"] and r["message"] != "off":
                lines.append(f"\n**{markdown_escape(r['chain'])}**: {markdown_escape(r['message'])}")
        return "\n".join(lines)


#: Characters with an inline meaning in Markdown (and HTML), escaped in names and messages the page
#: shows.  ``#``, ``+``, ``-`` and ``.`` only mean something at the start of a line, which an escaped
#: text never is (control characters, newlines included, become spaces).
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()!|<>~&])")


def markdown_escape(text: str) -> str:
    """``text`` shown literally in a Markdown panel: names from files and clients cannot format, link or
    inject HTML (every Markdown special character is backslash-escaped; control characters become spaces)."""
    clean = "".join(" " if ord(c) < 32 or ord(c) == 127 else c for c in str(text))
    return _MARKDOWN_SPECIAL.sub(r"\\\1", clean)


def _vec3(x: ArrayLike, what: str) -> FloatArray:
    a = np.array(x, dtype=np.float64).reshape(-1)
    if a.shape != (3,) or not np.all(np.isfinite(a)):
        raise SolverInputError(f"{what} must be three finite numbers, got {x!r}")
    return a


def _weight(w: Any) -> float:
    v = float(w)
    if not (0.0 <= v <= 1.0):
        raise SolverInputError(f"weight must be in [0, 1], got {w!r}")
    return v


def joint_names(skeleton: Skeleton, joints: Sequence[int]) -> list[str]:
    return [skeleton.names[int(j)] for j in joints]
