"""The commands: option sets, the work each one does, and how it reports.

Each file-producing command (``convert``, ``footlock``, ``reach``) is split
into ``add_<name>_options`` (argparse), ``<name>_motion`` (the work on one
loaded :class:`~kinema.cli._files.Motion`, returning the new clip and its
figures: units in the keys, ``status`` "ok" or "missed") and ``report_<name>``
(text, the same figures).  The single-file commands and the
batch workers call the very same functions, so a batch output is byte for
byte what the single command writes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import mocap
from ..errors import SolverInputError
from ..fk import forward_kinematics
from ..io._atomic import source_files
from ..io._bvh import evenly_spaced
from ..pose import Clip
from ..skeleton import Skeleton
from ._files import (
    CliError,
    Motion,
    UsageError,
    check_output,
    format_of,
    load_motion,
    load_sample,
    save_motion,
    scaled,
    scaled_mesh,
)
from ._status import EXIT_MISSED, EXIT_OK
from ._ui import UI, one_line, printable

if TYPE_CHECKING:
    from ..mesh import SkinnedMesh

__all__ = ["FILE_COMMANDS", "DASK_CONNECT_TIMEOUT_S", "MISS_RTOL", "command_argv", "add_input",
           "add_convert_options", "add_footlock_options", "add_reach_options", "positive_number", "run_info",
           "run_convert", "run_footlock", "run_reach", "run_sample", "run_warmup", "transform", "units_guess",
           "read_input", "joint_positions", "tree_lines"]

#: Commands that read one motion file and write one (what ``batch`` can run).
FILE_COMMANDS = ("footlock", "reach", "convert")

#: Seconds ``batch --dask ADDRESS`` waits for the scheduler by default (``--dask-timeout``).
DASK_CONNECT_TIMEOUT_S = 5.0

#: Default ``--tolerance`` of reach and footlock, as a fraction of the figure's height (:func:`units_guess`): an
#: effector (foot) ending farther than this from its target is reported as "missed" (exit status 3).
#: Reachable targets land to rounding (~1e-12 of the height); 1e-6 of a 1.7 m figure is 1.7 um.
MISS_RTOL = 1e-6

#: ``kinema info`` indents the tree up to this depth; deeper joints show their depth as a number
#: instead (a 10,000-deep chain would otherwise print lines of 40,000 spaces).
TREE_MAX_INDENT = 32


# ================================================================== helpers
def command_argv(command: str, src: str, out: str, extra: list[str]) -> list[str]:
    """The command line that runs ``command`` from ``src`` to ``out`` (convert takes OUT as a positional)."""
    if command == "convert":
        return [command, src, out, *extra]
    return [command, src, "-o", out, *extra]


def add_input(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", nargs="?", metavar="IN", help="input file (.bvh, .gltf, .glb)")
    p.add_argument("--sample", metavar="NAME", help="use a bundled sample clip instead of IN (walk, run)")
    p.add_argument("--clip", metavar="NAME", help="animation to read: a glTF file's by name (default: the first); "
                   "a BVH file's one is named after the file")


def read_input(args: argparse.Namespace, *, even_frames: bool = False) -> Motion:
    if args.sample and args.input:
        raise UsageError("give either IN or --sample, not both")
    if args.sample:
        return load_sample(args.sample)
    if not args.input:
        raise UsageError("no input: give a file (IN) or --sample NAME")
    return load_motion(args.input, clip_name=args.clip, fps=getattr(args, "fps", None), even_frames=even_frames)


def _floats(text: str, n: int, what: str) -> tuple[float, ...]:
    parts = [p for p in text.replace(" ", ",").split(",") if p]
    try:
        vals = tuple(float(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} must be {n} comma-separated numbers, got {text!r}") from None
    if len(vals) != n or not all(math.isfinite(v) for v in vals):
        raise argparse.ArgumentTypeError(f"{what} must be {n} comma-separated finite numbers, got {text!r}")
    return vals


def _xyz(text: str) -> tuple[float, ...]:
    return _floats(text, 3, "--target")


def _frame_range(text: str) -> tuple[int, int]:
    a, sep, b = text.partition(":")
    try:
        lo, hi = int(a), int(b)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--frames must be A:B (two frame numbers), got {text!r}") from None
    if not sep or lo < 0 or hi < lo:
        raise argparse.ArgumentTypeError(f"--frames must be A:B with 0 <= A <= B, got {text!r}")
    return lo, hi


def positive_number(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return v


def _non_negative(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(v) and v >= 0):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return v


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated joint names, got {text!r}")
    return names


#: ``kinema info``'s guesses (units, up axis) and the default ``--tolerance`` look at this many evenly
#: spaced frames of the clip at most (a 200000-frame capture costs no more than a short one).
GUESS_FRAMES = 64

#: Where the rest pose does not stand along the animation's up axis, the figure's height is this
#: percentile of its extent along that axis over those frames (its standing height; a crouch or a
#: glitch frame does not set it).
HEIGHT_PERCENTILE = 95.0


def _up_index(skeleton: Skeleton, p: np.ndarray) -> int | None:
    """The axis most bones run along in ``p (S, J, 3)`` (legs and spine outweigh the arms); None without bones."""
    par = skeleton.parents
    has = par >= 0
    if not np.any(has):
        return None
    return int(np.argmax(np.abs(p[:, has] - p[:, par[has]]).sum(axis=(0, 1))))


def _figure(skeleton: Skeleton, clip: Clip | None) -> tuple[int | None, float]:
    """``(up axis or None, height)`` of the figure, in the file's units.

    The up axis is the one most bones run along in the animation (up to :data:`GUESS_FRAMES` of its
    frames; the rest pose without a clip), the axis the commands work with.  The height is the rest
    pose's extent along it, unless the rest pose does not stand along that axis: many capture files
    (MotionBuilder's among them) lay every bone along X at rest and turn them upright in each frame,
    so their rest pose is neither upright nor as tall as the figure; then it is the
    :data:`HEIGHT_PERCENTILE` of the animated extents.
    """
    rest = forward_kinematics(skeleton, skeleton.rest_pose()).positions[None]
    up_rest = _up_index(skeleton, rest)
    if clip is None or clip.n_frames == 0:
        up, anim = up_rest, None
    else:
        pick = np.unique(np.round(np.linspace(0, clip.n_frames - 1, min(clip.n_frames, GUESS_FRAMES))))
        anim = forward_kinematics(skeleton, clip.pose[pick.astype(np.int64)]).positions
        up = _up_index(skeleton, anim)
    axis = mocap.UP_AXIS if up is None else up
    if anim is None or up == up_rest:
        return up, float(np.ptp(rest[0, :, axis]))
    return up, float(np.percentile(np.ptp(anim[..., axis], axis=-1), HEIGHT_PERCENTILE))


def units_guess(skeleton: Skeleton, clip: Clip | None = None) -> tuple[str, str, float]:
    """``(short, long, height)``: the figure's height (:func:`_figure`) and the units it suggests."""
    h = _figure(skeleton, clip)[1]
    if 0.3 <= h <= 3.0:
        return "m", "metres", h
    if 100.0 <= h <= 300.0:
        return "cm", "centimetres", h
    if 30.0 <= h < 100.0:
        return "units", "inches or centimetres (small figure)", h
    if 300.0 < h <= 3000.0:
        return "mm", "millimetres", h
    return "units", "unknown", h


def _up_guess(skeleton: Skeleton, clip: Clip | None = None) -> str:
    """The axis most bones run along in the animation (the rest pose without one): ``"X"``, ``"Y"``, ``"Z"``
    or ``"?"`` (no bones)."""
    up = _figure(skeleton, clip)[0]
    return "?" if up is None else "XYZ"[up]


# ===================================================================== info
def joint_positions(m: Motion, frame: int) -> np.ndarray:
    """``(J, 3)`` world position of every joint at ``frame`` (0-based), in the file's units."""
    n = m.clip.n_frames
    if n == 0:
        raise CliError(f"{m.source}: the clip has no frames")
    if not 0 <= frame < n:
        raise CliError(f"--frame {frame}: {m.source} has frames 0:{n - 1}")
    return forward_kinematics(m.skeleton, m.clip.pose[frame]).positions


def run_info(args: argparse.Namespace, ui: UI) -> int:
    m = read_input(args)
    sk, clip = m.skeleton, m.clip
    short, long, height = units_guess(sk, clip)
    up = _up_guess(sk, clip)
    ends = sk.meta.get("bvh_end_site")
    n_end = int(sum(bool(e) for e in ends)) if ends is not None else 0
    try:
        feet = [sk.names[f] for f in mocap.find_feet(sk)]
    except Exception:
        feet = []
    positions = joint_positions(m, args.frame) if args.joints else None
    info: dict[str, Any] = {
        "file": m.source,
        "format": m.kind,
        "joints": sk.n_joints,
        "end_sites": n_end,
        "frames": clip.n_frames,
        "fps": float(clip.fps),
        "duration": float(clip.duration),
        "even_frames": clip.times is None,
        "clip": m.clip_name,
        "clips": list(m.clip_names),
        "height": height,
        "units": long,
        "up_axis": up,
        "feet": feet,
        "names": list(sk.names),
        "parents": [int(x) for x in sk.parents],
    }
    if positions is not None:
        info["frame"] = args.frame
        info["positions"] = {name: [float(x) for x in p] for name, p in zip(sk.names, positions, strict=True)}
    if args.json:
        ui.print(json.dumps(info, indent=2))  # JSON escapes control characters itself
        return 0
    joints = f"{sk.n_joints}" + (f" ({sk.n_joints - n_end} + {n_end} end sites)" if n_end else "")
    timing = f"{clip.n_frames} at {clip.fps:.6g} fps ({clip.duration:.3f} s)"
    if clip.times is not None and not evenly_spaced(clip.times):
        timing += ", uneven key times"
    rows = [("file", f"{m.source} ({m.kind})"), ("joints", joints), ("frames", timing)]
    if m.clip_names:
        rows.append(("clips", ", ".join(m.clip_names) + f" (showing {m.clip_name!r})"))
    rows.append(("units", f"{long} (guess: the figure is {height:.4g} {short} tall)"))
    up_text = f"{up} up" + ("" if up == "Y" else "  (kinema works Y up; a Z-up BVH loads with load_bvh(up='z'))")
    rows.append(("axes", up_text))
    rows.append(("feet", ", ".join(feet) if feet else "none found by name (footlock needs --feet)"))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        ui.print(printable(f"{k.ljust(width)}  {v}"))
    ui.print("")
    if positions is not None:
        ui.table(("joint", "x", "y", "z"),
                 [(printable(name), *(f"{x:.6g}" for x in p)) for name, p in zip(sk.names, positions, strict=True)],
                 title=f"world positions at frame {args.frame} ({short}, {up} up):", align="lrrr")
        return 0
    ui.print("skeleton:")
    for line in tree_lines(sk):
        ui.print(line)
    return 0


def tree_lines(sk: Skeleton) -> list[str]:
    """The joint tree as text lines (``|--``/`` `-- `` branches), names escaped for the terminal.

    Iterative (a depth-first walk with an explicit stack), so a 10,000-deep
    chain prints like any other; beyond :data:`TREE_MAX_INDENT` levels a
    line shows its depth as a number instead of more indentation.
    """
    children: list[list[int]] = [[] for _ in range(sk.n_joints)]
    roots: list[int] = []
    for j, p in enumerate(sk.parents):
        (children[int(p)] if p >= 0 else roots).append(j)
    lines: list[str] = []
    # (joint, prefix of its line, is the last child, depth); reversed pushes keep the file order
    stack: list[tuple[int, str, bool, int]] = [(r, "", True, 0) for r in reversed(roots)]
    while stack:
        j, prefix, last, depth = stack.pop()
        name = printable(sk.names[j])
        if depth == 0:
            lines.append(name)
            child_prefix = ""
        elif depth <= TREE_MAX_INDENT:
            lines.append(prefix + ("`-- " if last else "|-- ") + name)
            child_prefix = prefix + ("    " if last else "|   ")
        else:
            lines.append(f"{prefix}... [depth {depth}] {name}")
            child_prefix = prefix
        kids = children[j]
        for i in range(len(kids) - 1, -1, -1):
            stack.append((kids[i], child_prefix, i == len(kids) - 1, depth + 1))
    return lines


# ================================================================== convert
def add_convert_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scale", type=positive_number, default=1.0, help="multiply every length (e.g. 0.01: cm to m)")
    p.add_argument("--fps", type=positive_number, help="resample the motion (glTF or BVH) at this rate")
    p.add_argument("--mesh", choices=("keep", "bones", "none"),
                   help="glTF output mesh: keep the loaded one, capsules along the bones, or none "
                        "(default: keep if there is one, else bones)")


# ================================================================= footlock
def add_footlock_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("contacts (defaults are estimated from the clip)")
    g.add_argument("--feet", type=_names, metavar="L,R", help="foot joints (default: joints named *foot*/*ankle*)")
    g.add_argument("--height", type=positive_number, metavar="H",
                   help=f"contact height above the ground, file units (default {mocap.HEIGHT_ON_FRACTION:g} "
                        "of the leg length)")
    g.add_argument("--speed", type=positive_number, metavar="V",
                   help="contact speed, units/s (default: estimated from the foot's noise while low)")
    g.add_argument("--ground", type=float, metavar="Y", help="ground height (default: estimated per foot)")
    g.add_argument("--hysteresis", type=positive_number, default=mocap.DEFAULT_HYSTERESIS, metavar="R",
                   help="a contact ends above R x the thresholds (default %(default)s)")
    g.add_argument("--min-contact", type=_non_negative, default=mocap.DEFAULT_MIN_CONTACT_S, metavar="S",
                   help="drop contacts shorter than S seconds (default %(default)s)")
    s = p.add_argument_group("locking")
    s.add_argument("--ease", type=_non_negative, default=mocap.DEFAULT_EASE_S, metavar="S",
                   help="seconds to ease the IK in and out around each contact (default %(default)s)")
    s.add_argument("--no-hips", action="store_true", help="never lower the hips (feet may fall short instead)")
    s.add_argument("--keep-length", action=argparse.BooleanOptionalAction, default=True,
                   help="near-straight legs keep their animated length: a held foot's height follows the leg, "
                        "it stays put across the ground (default: on; --no-keep-length holds the foot's "
                        "height at the lock too)")
    _tolerance(s, "a foot")


def _tolerance(p: Any, what: str) -> None:
    p.add_argument("--tolerance", type=positive_number, metavar="D",
                   help=f"{what} ending farther than D (file units) from its target is reported as missed, "
                        f"exit status 3 (default {MISS_RTOL:g} of the figure's height)")


def _tolerance_of(m: Motion, args: argparse.Namespace) -> float:
    given = getattr(args, "tolerance", None)
    return float(given) if given is not None else MISS_RTOL * max(units_guess(m.skeleton, m.clip)[2], 1e-12)


def footlock_motion(m: Motion, args: argparse.Namespace) -> tuple[Skeleton, Clip, dict[str, Any]]:
    """Foot-lock one motion; returns the skeleton, the locked clip and its figures (see :func:`report_footlock`).

    Figure keys carry their unit: ``_units`` is the file's length unit
    (``units``: "m", "cm", ...), ``_deg_per_s`` angular speed; ``status`` is
    "ok" or "missed" (a foot ended farther than ``tolerance_units`` from its lock).
    """
    if args.hysteresis < 1.0:
        raise UsageError(f"--hysteresis must be >= 1, got {args.hysteresis}")
    if m.clip.n_frames == 0:
        raise CliError(f"{m.source}: the clip has no frames; there is nothing to foot-lock")
    res = mocap.footlock(
        m.skeleton, m.clip, args.feet, ease=args.ease, lower_hips=not args.no_hips,
        keep_length=args.keep_length, height=args.height,
        speed=args.speed, ground=args.ground, hysteresis=args.hysteresis, min_duration=args.min_contact,
    )
    r = res.metrics
    tol = _tolerance_of(m, args)
    figures: dict[str, Any] = {
        "command": "footlock",
        "status": "missed" if r["ik_error_max"] > tol else "ok",
        "frames": r["frames"],
        "units": units_guess(m.skeleton, m.clip)[0],
        "feet": r["feet"],
        "contacts_per_foot": r["contacts_per_foot"],
        "contact_frames_per_foot": r["contact_frames_per_foot"],
        "skate_before_units_per_s": r["skate_before"],
        "skate_after_units_per_s": r["skate_after"],
        "skate_reduction_percent": 100.0 * r["skate_reduction"],
        "changed_joints": r["changed_joints"],
        "joint_speed_before_deg_per_s": math.degrees(r["joint_speed_before"]),
        "joint_speed_before_joint": r["joint_speed_before_joint"],
        "joint_speed_after_deg_per_s": math.degrees(r["joint_speed_after"]),
        "joint_speed_after_joint": r["joint_speed_after_joint"],
        "hips_drop_max_units": r["hips_drop_max"],
        "error_max_units": r["ik_error_max"],
        "tolerance_units": tol,
        "up_axis": _up_guess(m.skeleton, m.clip),  # footlock works Y up: another axis is warned about
    }
    return m.skeleton, res.clip, figures


def _speeds(f: dict[str, Any]) -> str:
    return (f"{f['joint_speed_before_deg_per_s']:.1f} deg/s ({f['joint_speed_before_joint']}) -> "
            f"{f['joint_speed_after_deg_per_s']:.1f} deg/s ({f['joint_speed_after_joint']}), "
            f"largest of the changed joints")


def report_footlock(ui: UI, src: str, out: str, f: dict[str, Any]) -> None:
    u = f["units"]
    s0, s1 = f["skate_before_units_per_s"], f["skate_after_units_per_s"]
    red = f" ({-f['skate_reduction_percent']:+.1f}%)" if s0 > 0 else ""
    per_foot = ", ".join(f"{name} {_count(f['contacts_per_foot'][name], 'contact')} over "
                         f"{_count(f['contact_frames_per_foot'][name], 'frame')}" for name in f["feet"])
    rows = [
        ("input", f"{src} ({f['frames']} frames)"),
        ("contacts", f"{per_foot} (of {f['frames']} frames)"),
        ("foot skate", f"{s0:.4g} -> {s1:.4g} {u}/s mean horizontal foot speed in contacts{red}"),
        ("joint speed", _speeds(f)),
        ("changed", ", ".join(f["changed_joints"]) + (" (and the hips' height)" if f["hips_drop_max_units"] > 0
                                                          else "")),
        ("hips lowered", f"up to {f['hips_drop_max_units']:.4g} {u}" if f["hips_drop_max_units"] > 0 else "no"),
        ("result", _status_text(f)),
        ("wrote", out),
    ]
    _rows(ui, rows)


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _status_text(f: dict[str, Any]) -> str:
    u = f["units"]
    what = "a foot" if f["command"] == "footlock" else "the effector"
    if f["status"] == "missed":
        return (f"missed: {what} ends {f['error_max_units']:.4g} {u} from its target "
                f"(tolerance {f['tolerance_units']:.3g} {u})")
    return f"ok: within {f['error_max_units']:.3g} {u} of the target (tolerance {f['tolerance_units']:.3g} {u})"


def _rows(ui: UI, rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        ui.print(printable(f"{k.ljust(width)}  {v}"))


# ==================================================================== reach
def add_reach_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--effector", required=True, metavar="NAME", help="joint that reaches (e.g. RightWrist)")
    p.add_argument("--target", required=True, type=_xyz, metavar="X,Y,Z",
                   help="new world target, file units (e.g. -30,120,40; kinema info FILE --joints shows where "
                        "the joints are)")
    p.add_argument("--frames", required=True, type=_frame_range, metavar="A:B",
                   help="frames (0-based, inclusive) where the effector holds the target")
    p.add_argument("--blend", type=int, metavar="N",
                   help=f"frames to blend in before A and out after B (default {mocap.DEFAULT_REACH_BLEND_S:g} s)")
    p.add_argument("--chain", metavar="START",
                   help="solve the chain from START (e.g. a spine joint) to the effector with CCD "
                        "instead of two-bone IK on the arm")
    p.add_argument("--free-orientation", action="store_true",
                   help="let the effector turn with its parent instead of keeping its animated orientation")
    _tolerance(p, "an effector")


def reach_motion(m: Motion, args: argparse.Namespace) -> tuple[Skeleton, Clip, dict[str, Any]]:
    """Re-aim one motion's reach; returns the skeleton, the new clip and its figures (units in the keys)."""
    if args.blend is not None and args.blend < 0:
        raise UsageError(f"--blend must be >= 0 frames, got {args.blend}")
    a, b = args.frames
    if m.clip.n_frames == 0:
        raise CliError(f"{m.source}: the clip has no frames; there is nothing to re-aim")
    if b >= m.clip.n_frames:
        raise CliError(f"--frames {a}:{b}: the clip has frames 0:{m.clip.n_frames - 1}")
    res = mocap.reach(m.skeleton, m.clip, args.effector, args.target, (a, b), blend=args.blend, chain=args.chain,
                      keep_orientation=not args.free_orientation)
    r = res.metrics
    tol = _tolerance_of(m, args)
    figures: dict[str, Any] = {
        "command": "reach",
        "status": "missed" if r["max_error"] > tol else "ok",
        "frames": r["frames"],
        "units": units_guess(m.skeleton, m.clip)[0],
        "effector": r["effector"],
        "target_units": [float(x) for x in args.target],
        "range": r["range"],
        "blend_frames": r["blend"],
        "error_max_units": r["max_error"],
        "tolerance_units": tol,
        "moved_max_units": r["moved_max"],
        "changed_joints": r["changed_joints"],
        "joint_speed_before_deg_per_s": math.degrees(r["joint_speed_before"]),
        "joint_speed_before_joint": r["joint_speed_before_joint"],
        "joint_speed_after_deg_per_s": math.degrees(r["joint_speed_after"]),
        "joint_speed_after_joint": r["joint_speed_after_joint"],
    }
    return m.skeleton, res.clip, figures


def report_reach(ui: UI, src: str, out: str, f: dict[str, Any]) -> None:
    u = f["units"]
    a, b = f["range"]
    rows = [
        ("input", f"{src} ({f['frames']} frames)"),
        ("effector", f"{f['effector']} -> ({', '.join(f'{x:g}' for x in f['target_units'])}) {u}"
                     f" over frames {a}:{b}, blend {f['blend_frames']} frames"),
        ("error", f"{f['error_max_units']:.3g} {u} (largest over {a}:{b})"),
        ("moved", f"up to {f['moved_max_units']:.4g} {u} from the animation"),
        ("joint speed", _speeds(f)),
        ("result", _status_text(f)),
        ("wrote", out),
    ]
    _rows(ui, rows)


def convert_motion(m: Motion, args: argparse.Namespace) -> tuple[Skeleton, Clip, SkinnedMesh | None, dict[str, Any]]:
    """``--scale`` applied to the skeleton, the clip and the loaded skinned mesh alike (the mesh was written at
    its original size, distorting the character).  A scale that would carry a length beyond what the output
    holds (float64; float32 for glTF) is a :class:`CliError` naming ``--scale``, before anything is scaled."""
    factor = float(args.scale)
    _check_scale(m, factor, format_of(args.output))
    sk, clip = scaled(m.skeleton, m.clip, factor)
    return sk, clip, scaled_mesh(m.mesh, factor), {"command": "convert", "status": "ok", "frames": clip.n_frames,
                                                   "joints": sk.n_joints, "fps": float(clip.fps)}


def _check_scale(m: Motion, factor: float, out_kind: str) -> None:
    """:class:`CliError` when ``factor`` times the motion's largest length (skeleton, clip, mesh) is beyond the
    output's number range: float32 in glTF, float64 otherwise (the product would overflow to inf)."""
    arrays = [m.skeleton.translations, m.clip.pose.translations]
    if m.mesh is not None:
        arrays += [m.mesh.positions, np.asarray(m.mesh.inverse_bind_matrices)[:, :3, 3]]
    largest = max((float(np.max(np.abs(a))) for a in arrays if np.size(a)), default=0.0)
    limit = float(np.finfo(np.float32 if out_kind == "gltf" else np.float64).max)
    if not largest * factor <= limit:  # Python floats: an overflow is inf, no warning
        where = "glTF's float32" if out_kind == "gltf" else "float64"
        if factor == 1.0:  # no --scale given (or --scale 1): the file's own length is the problem
            raise CliError(f"{m.source}: the largest length, {largest:.3g}, is beyond {where} range ({limit:.3g})")
        raise CliError(f"{m.source}: --scale {factor:.3g}: the largest length, {largest:.3g}, would become "
                       f"{largest * factor:.3g}, beyond {where} range ({limit:.3g})")


# ============================================================ shared runner
def transform(command: str, m: Motion, args: argparse.Namespace
              ) -> tuple[Skeleton, Clip, SkinnedMesh | None, dict[str, Any]]:
    """The work of a file command on one motion: ``(skeleton, clip, mesh, figures)``; ``mesh`` is the loaded
    skinned mesh to write with them (``loaded_mesh`` of :func:`save_motion`: :attr:`Motion.mesh`, scaled by
    ``convert --scale``); ``figures["status"]`` ok/missed.  The single-file commands and the batch workers both
    call it, so both write the same output.

    numpy's overflow warnings are off here: a motion too large for the solvers ends in their one-line error (named
    after the file here), not in RuntimeWarnings printed before it."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        try:
            return _transform(command, m, args)
        except (SolverInputError, ArithmeticError) as e:  # the file's values, not the options: name the file
            text = one_line(e)
            if text.startswith(m.source):
                raise
            raise CliError(f"{printable(m.source)}: {text}") from e


def _transform(command: str, m: Motion, args: argparse.Namespace
               ) -> tuple[Skeleton, Clip, SkinnedMesh | None, dict[str, Any]]:
    if command == "footlock":
        sk, clip, figures = footlock_motion(m, args)
        return sk, clip, m.mesh, figures
    if command == "reach":
        sk, clip, figures = reach_motion(m, args)
        return sk, clip, m.mesh, figures
    if command == "convert":
        return convert_motion(m, args)
    raise CliError(f"unknown command {command!r}")


#: The kernel group a worker compiles on a command's cold first run (:mod:`kinema._precompile`): the foot lock's
#: leg solves and a reach's arm solve (with ``--chain`` too: the arm's two-bone finish after CCD) run the same
#: two-bone batch.
PRECOMPILED = {"footlock": "two_bone", "reach": "two_bone"}


def _start_precompile(group: str, m: Motion) -> None:
    """A cold first run on a clip long enough to compile for: a second process compiles the two-bone kernels
    while this one compiles the rest (:mod:`kinema._precompile`; nothing starts when they are cached).  A
    short clip runs the plain kernels, compiling nothing (:mod:`kinema._kernels._tier`)."""
    from .._kernels._tier import compiles
    from .._precompile import start

    pose = m.clip.pose
    if compiles(pose.translations.size + pose.rotations.size + pose.scales.size):
        start(group)


def _run_file_command(command: str, args: argparse.Namespace, ui: UI) -> int:
    out = args.output
    inputs = [args.input] if args.input else []
    check_output(out, inputs, args.force)  # before any work: fail fast
    even = format_of(out) == "bvh"
    if even and getattr(args, "mesh", None) is not None:
        raise UsageError(f"--mesh applies to glTF output (.gltf, .glb); {out} is BVH")
    with ui.status("loading") as st:
        m = read_input(args, even_frames=even)
        st.describe(f"{command}: {m.source}")
        if command in PRECOMPILED:
            _start_precompile(PRECOMPILED[command], m)
        sk, clip, mesh, figures = transform(command, m, args)
        st.describe(f"writing {out}")
        inputs += source_files(m.skeleton.meta)  # a glTF's external buffers are inputs too
        save_motion(out, sk, clip, name=m.clip_name, mesh=getattr(args, "mesh", None), inputs=inputs,
                    force=args.force, loaded_mesh=mesh, scale=float(getattr(args, "scale", 1.0)))
    if getattr(args, "json", False):
        figures["output"] = out
        figures["input"] = m.source
        figures["seconds"] = time.perf_counter() - getattr(args, "started", time.perf_counter())
        ui.print(json.dumps(figures, indent=2))
    elif command == "footlock":
        report_footlock(ui, m.source, out, figures)
    elif command == "reach":
        report_reach(ui, m.source, out, figures)
    else:
        ui.print(f"wrote {printable(out)} ({figures['joints']} joints, {figures['frames']} frames at "
                 f"{figures['fps']:.6g} fps)")
    up = figures.get("up_axis", "Y")
    if up not in ("Y", "?"):
        ui.note(f"kinema {command}: warning: {printable(m.source)} looks {up} up (its bones run mostly along {up}); "
                "footlock works Y up, so its contacts and hips are likely wrong here (a Z-up BVH loads Y up with "
                "kinema.io.load_bvh(path, up='z'))")
    if figures["status"] == "missed":
        ui.note(f"kinema {command}: missed: {_status_text(figures).removeprefix('missed: ')}; "
                f"the output was written (exit status {EXIT_MISSED})")
        return EXIT_MISSED
    return EXIT_OK


def run_convert(args: argparse.Namespace, ui: UI) -> int:
    return _run_file_command("convert", args, ui)


def run_footlock(args: argparse.Namespace, ui: UI) -> int:
    return _run_file_command("footlock", args, ui)


def run_reach(args: argparse.Namespace, ui: UI) -> int:
    return _run_file_command("reach", args, ui)


def run_sample(args: argparse.Namespace, ui: UI) -> int:
    m = load_sample(args.name)
    check_output(args.output, [], args.force)
    save_motion(args.output, m.skeleton, m.clip, name=m.clip_name, force=args.force)
    ui.print(f"wrote {printable(args.output)} (DeepMimic {args.name}: {m.skeleton.n_joints} joints, "
             f"{m.clip.n_frames} frames at {m.clip.fps:.6g} fps, metres, Y up)")
    return 0


# =================================================================== warmup
#: Targets in warmup's large batch: more than any solver's serial-batch limit, so the parallel
#: kernels compile too (the solvers run batches up to a small size in the calling thread).
WARMUP_BATCH = 1024


#: The warmup steps a second process runs on a cold cache (:mod:`kinema._precompile`'s ``"warmup"``): about half
#: of a cold warmup's compiling (FABRIK's and DLS's kernels), none of whose kernel modules the other steps use.
SECOND_PROCESS_STEPS = frozenset({"solve_fabrik", "solve_fabrik_tree", "solve_dls"})


def warm_kernels(only: Collection[str] | None = None, skip: Collection[str] = ()) -> list[tuple[str, float]]:
    """Compile (or load from numba's cache) every kernel: ``[(what, seconds), ...]``.

    ``only``: run just the steps of these names; ``skip``: leave these out (the steps another process runs).

    Imports every ``kinema._kernels`` module, then calls each solver through
    the public API on the bundled humanoid with one target, two targets and
    :data:`WARMUP_BATCH` targets (each takes its own path: single call, small
    batch in this thread, parallel batch), forward kinematics the same way
    (its parallel driver from :data:`~kinema.fk.FK_PARALLEL_MIN_JOINTS`
    joint transforms) and its inverse, every function of
    :mod:`kinema.rotation`, the joint limits' clamp and violation, the 2D
    two-bone solver, the BVH reader and writer, and what the commands run:
    foot locking and reaches (two-bone and spine chain) on the sample walk.
    """
    import importlib
    import pkgutil
    import tempfile

    from .. import _kernels, rotation, samples
    from .._ccd import Goal, solve_ccd, solve_chains
    from .._dls import solve_dls
    from .._fabrik import solve_fabrik, solve_fabrik_tree
    from .._kernels._tier import compile_always
    from .._two_bone import solve_two_bone, solve_two_bone_2d
    from ..fk import FK_PARALLEL_MIN_JOINTS, world_to_local
    from ..goals import PositionGoal
    from ..io import load_bvh, save_bvh
    from ..limits import EulerRange, Hinge, SwingTwist

    compile_always()  # the point of warming up: compiled code in the cache, not the plain kernels
    steps: list[tuple[str, float]] = []

    def step(what: str, fn: Any) -> None:
        if what in skip or (only is not None and what not in only):
            return
        t0 = time.perf_counter()
        fn()
        steps.append((what, time.perf_counter() - t0))

    def modules() -> None:
        for info in pkgutil.iter_modules(_kernels.__path__):
            importlib.import_module(f"{_kernels.__name__}.{info.name}")

    sk = samples.humanoid()
    walk = samples.clip("walk")
    pose = sk.rest_pose()
    arm = ("right_shoulder", "right_elbow", "right_wrist")
    spine = ("root", "right_wrist")
    shoulder = forward_kinematics(sk, pose).positions[sk.index("right_shoulder")]
    offsets = np.random.default_rng(0).normal(0.0, 0.2, size=(WARMUP_BATCH, 3))
    sizes = [shoulder + offsets[0], shoulder + offsets[:2], shoulder + offsets]

    def each(solve: Any) -> Any:
        return lambda: [solve(t) for t in sizes]

    step("kernel modules", modules)
    big = pose.broadcast((-(-FK_PARALLEL_MIN_JOINTS // sk.n_joints),))  # enough joints for the parallel driver
    step("forward_kinematics", lambda: [forward_kinematics(sk, p, matrices=m) for p in
                                        (pose, walk.pose[:2], walk.pose.broadcast(), big) for m in (False, True)])

    def inverse_fk() -> None:
        for p in (pose, walk.pose, big):
            world = forward_kinematics(sk, p)
            world_to_local(sk, world.rotations, world.positions)

    step("world_to_local", inverse_fk)

    def rotations() -> None:
        q = walk.pose.rotations[:2, 1]
        v = walk.pose.translations[:2, 1]
        t = np.array([0.25, 0.75])
        rotation.multiply(q, q)
        rotation.equal(q, q)  # normalize
        rotation.canonical(q)
        rotation.rotate(q, v)
        rotation.from_matrix(rotation.as_matrix(q))
        rotation.as_axis_angle(rotation.from_axis_angle(v, t))
        rotation.from_rotvec(rotation.as_rotvec(q))
        rotation.as_euler(rotation.from_euler("ZXY", v), "ZXY")
        rotation.slerp(q, q[::-1], t)
        rotation.nlerp(q, q[::-1], t)
        rotation.angle_between(q, q[::-1])
        rotation.from_two_vectors(v, v[::-1])
        rotation.swing_twist(q, v)

    step("rotation", rotations)

    def limits() -> None:
        q = walk.pose.rotations[:2, 1]
        for lim in (Hinge((1.0, 0.0, 0.0), -1.0, 1.0), SwingTwist((0.0, 1.0, 0.0), 0.5),
                    EulerRange("ZXY", (-1.0, -1.0, -1.0), (1.0, 1.0, 1.0))):
            lim.clamp_hit(q, q[::-1])
            lim.violation(q)

    step("joint limits", limits)
    # Two-bone compiles two sets of drivers: the basic ones and, for limits, hints, smooth history or
    # twist="rest" (here), the full ones.
    step("solve_two_bone", each(lambda t: (solve_two_bone(sk, pose, arm, t),
                                           solve_two_bone(sk, pose, arm, t, twist="rest"))))
    step("solve_ccd", each(lambda t: solve_ccd(sk, pose, spine, t)))
    step("solve_fabrik", each(lambda t: solve_fabrik(sk, pose, spine, t)))
    step("solve_fabrik_tree", each(lambda t: solve_fabrik_tree(sk, pose, {"right_wrist": t, "left_wrist": t})))
    step("solve_chains", each(lambda t: solve_chains(sk, pose, [Goal(spine, t)])))
    step("solve_dls", each(lambda t: solve_dls(sk, pose, [PositionGoal("right_wrist", t)])))
    step("solve_two_bone_2d", lambda: [solve_two_bone_2d(t[..., :2] * 0.0, t[..., :2], 0.3, 0.3) for t in sizes])

    def bvh() -> None:
        with tempfile.TemporaryDirectory(prefix="kinema-warmup-") as tmp:
            path = os.path.join(tmp, "walk.bvh")
            save_bvh(path, sk, walk)
            load_bvh(path)

    step("BVH reader and writer", bvh)
    step("footlock", lambda: mocap.footlock(sk, walk))
    wrist = forward_kinematics(sk, walk.pose[20]).positions[sk.index("right_wrist")]
    step("reach", lambda: [mocap.reach(sk, walk, "right_wrist", wrist + 0.05, (16, 24), chain=c)
                           for c in (None, "chest")])
    return steps


def run_warmup(args: argparse.Namespace, ui: UI) -> int:
    t0 = time.perf_counter()
    from .._precompile import start, wait

    with ui.status("warming up kinema's kernels"):
        # On a cold cache a second process compiles FABRIK's and DLS's kernels meanwhile; those steps then run
        # here too, loading what it compiled (or compiling what it did not: nothing is left out if it failed).
        second = SECOND_PROCESS_STEPS if start("warmup") else frozenset()
        steps = warm_kernels(skip=second)
        if second:
            wait("warmup")
            # their seconds here are the load (the second process's compiling ran beside the steps above)
            steps += [(f"{what} (compiled by a second process)", dt) for what, dt in warm_kernels(only=second)]
    total = time.perf_counter() - t0
    ui.table(("kernels", "seconds"), [(what, f"{dt:.2f}") for what, dt in steps], align="lr")
    ui.print(f"kernels ready in {total:.2f} s (compiled now, or loaded from numba's cache if they were compiled "
             "before); later commands start without compiling")
    return 0
