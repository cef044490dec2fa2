"""The commands: option sets, the work each one does, and how it reports.

Each file-producing command (``convert``, ``footlock``, ``reach``) is split
into ``add_<name>_options`` (argparse), ``<name>_motion`` (the work on one
loaded :class:`~kinema.cli._files.Motion`, returning the new clip and its
metrics) and ``report_<name>`` (text).  The single-file commands and the
batch workers call the very same functions, so a batch output is byte for
byte what the single command writes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from typing import Any

import numpy as np

from .. import mocap
from ..fk import forward_kinematics
from ..pose import Clip
from ..skeleton import Skeleton
from ._files import CliError, Motion, _even, check_output, format_of, load_motion, load_sample, save_motion, scaled
from ._ui import UI

__all__ = ["FILE_COMMANDS", "command_argv", "add_input", "add_convert_options", "add_footlock_options",
           "add_reach_options", "run_info", "run_convert", "run_footlock", "run_reach", "run_sample", "transform",
           "units_guess", "read_input"]

#: Commands that read one motion file and write one (what ``batch`` can run).
FILE_COMMANDS = ("footlock", "reach", "convert")


# ================================================================== helpers
def command_argv(command: str, src: str, out: str, extra: list[str]) -> list[str]:
    """The command line that runs ``command`` from ``src`` to ``out`` (convert takes OUT as a positional)."""
    if command == "convert":
        return [command, src, out, *extra]
    return [command, src, "-o", out, *extra]


def add_input(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", nargs="?", metavar="IN", help="input file (.bvh, .gltf, .glb)")
    p.add_argument("--sample", metavar="NAME", help="use a bundled sample clip instead of IN (walk, run)")
    p.add_argument("--clip", metavar="NAME", help="glTF animation to read (default: the first)")


def read_input(args: argparse.Namespace, *, even_frames: bool = False) -> Motion:
    if args.sample and args.input:
        raise CliError("give either IN or --sample, not both")
    if args.sample:
        return load_sample(args.sample)
    if not args.input:
        raise CliError("no input: give a file (IN) or --sample NAME")
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


def _positive(text: str) -> float:
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


def units_guess(skeleton: Skeleton, clip: Clip | None = None) -> tuple[str, str, float]:
    """``(short, long, height)``: the figure's height (rest pose, up axis) and the units it suggests."""
    p = forward_kinematics(skeleton, skeleton.rest_pose()).positions
    h = float(p[:, mocap.UP_AXIS].max() - p[:, mocap.UP_AXIS].min()) if len(p) else 0.0
    if 0.3 <= h <= 3.0:
        return "m", "metres", h
    if 100.0 <= h <= 300.0:
        return "cm", "centimetres", h
    if 30.0 <= h < 100.0:
        return "units", "inches or centimetres (small figure)", h
    if 300.0 < h <= 3000.0:
        return "mm", "millimetres", h
    return "units", "unknown", h


def _up_guess(skeleton: Skeleton) -> str:
    """The axis most bones run along in the rest pose (legs and spine outweigh the arms)."""
    p = forward_kinematics(skeleton, skeleton.rest_pose()).positions
    par = skeleton.parents
    has = par >= 0
    if not np.any(has):
        return "?"
    bones = np.abs(p[has] - p[par[has]]).sum(axis=0)
    return "XYZ"[int(np.argmax(bones))]


def _deg(x: float) -> str:
    return f"{math.degrees(x):.1f} deg/s"


# ===================================================================== info
def run_info(args: argparse.Namespace, ui: UI) -> int:
    m = read_input(args)
    sk, clip = m.skeleton, m.clip
    short, long, height = units_guess(sk, clip)
    up = _up_guess(sk)
    ends = sk.meta.get("bvh_end_site")
    n_end = int(sum(bool(e) for e in ends)) if ends is not None else 0
    try:
        feet = [sk.names[f] for f in mocap.find_feet(sk)]
    except Exception:
        feet = []
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
    if args.json:
        ui.print(json.dumps(info, indent=2))
        return 0
    joints = f"{sk.n_joints}" + (f" ({sk.n_joints - n_end} + {n_end} end sites)" if n_end else "")
    timing = f"{clip.n_frames} at {clip.fps:.6g} fps ({clip.duration:.3f} s)"
    if clip.times is not None and not _even(clip.times):
        timing += ", uneven key times"
    rows = [("file", f"{m.source} ({m.kind})"), ("joints", joints), ("frames", timing)]
    if m.clip_names:
        rows.append(("clips", ", ".join(m.clip_names) + f" (showing {m.clip_name!r})"))
    rows.append(("units", f"{long} (guess: the rest pose is {height:.4g} {short} tall)"))
    up_text = f"{up} up" + ("" if up == "Y" else "  (kinema works Y up; a Z-up BVH loads with load_bvh(up='z'))")
    rows.append(("axes", up_text))
    rows.append(("feet", ", ".join(feet) if feet else "none found by name (footlock needs --feet)"))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        ui.print(f"{k.ljust(width)}  {v}")
    ui.print("")
    ui.print("skeleton:")
    for line in _tree_lines(sk):
        ui.print(line)
    return 0


def _tree_lines(sk: Skeleton) -> list[str]:
    lines: list[str] = []

    def walk(j: int, prefix: str, last: bool, root: bool) -> None:
        lines.append((prefix + ("`-- " if last else "|-- ") if not root else "") + sk.names[j])
        kids = sk.children(j)
        child_prefix = prefix + ("    " if last else "|   ") if not root else ""
        for i, c in enumerate(kids):
            walk(c, child_prefix, i == len(kids) - 1, False)

    for j in range(sk.n_joints):
        if sk.parents[j] < 0:
            walk(j, "", True, True)
    return lines


# ================================================================== convert
def add_convert_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scale", type=_positive, default=1.0, help="multiply every length (e.g. 0.01: cm to m)")
    p.add_argument("--fps", type=_positive, help="resample a glTF animation at this rate")
    p.add_argument("--mesh", choices=("keep", "bones", "none"),
                   help="glTF output mesh: keep the loaded one, capsules along the bones, or none "
                        "(default: keep if there is one, else bones)")


def convert_motion(m: Motion, args: argparse.Namespace) -> tuple[Skeleton, Clip, dict[str, Any]]:
    sk, clip = scaled(m.skeleton, m.clip, float(args.scale))
    return sk, clip, {"frames": clip.n_frames, "joints": sk.n_joints, "fps": float(clip.fps)}


# ================================================================= footlock
def add_footlock_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("contacts (defaults are estimated from the clip)")
    g.add_argument("--feet", type=_names, metavar="L,R", help="foot joints (default: joints named *foot*/*ankle*)")
    g.add_argument("--height", type=_positive, metavar="H",
                   help=f"contact height above the ground, file units (default {mocap.HEIGHT_ON_FRACTION:g} "
                        "of the leg length)")
    g.add_argument("--speed", type=_positive, metavar="V",
                   help="contact speed, units/s (default: estimated from the foot's noise while low)")
    g.add_argument("--ground", type=float, metavar="Y", help="ground height (default: estimated per foot)")
    g.add_argument("--hysteresis", type=_positive, default=mocap.DEFAULT_HYSTERESIS, metavar="R",
                   help="a contact ends above R x the thresholds (default %(default)s)")
    g.add_argument("--min-contact", type=_non_negative, default=mocap.DEFAULT_MIN_CONTACT_S, metavar="S",
                   help="drop contacts shorter than S seconds (default %(default)s)")
    s = p.add_argument_group("locking")
    s.add_argument("--ease", type=_non_negative, default=mocap.DEFAULT_EASE_S, metavar="S",
                   help="seconds to ease the IK in and out around each contact (default %(default)s)")
    s.add_argument("--no-hips", action="store_true", help="never lower the hips (feet may fall short instead)")


def footlock_motion(m: Motion, args: argparse.Namespace) -> tuple[Skeleton, Clip, dict[str, Any]]:
    if args.hysteresis < 1.0:
        raise CliError(f"--hysteresis must be >= 1, got {args.hysteresis}")
    res = mocap.footlock(
        m.skeleton, m.clip, args.feet, ease=args.ease, lower_hips=not args.no_hips, height=args.height,
        speed=args.speed, ground=args.ground, hysteresis=args.hysteresis, min_duration=args.min_contact,
    )
    metrics = dict(res.metrics)
    metrics["units"] = units_guess(m.skeleton)[0]
    return m.skeleton, res.clip, metrics


def report_footlock(ui: UI, src: str, out: str, metrics: dict[str, Any]) -> None:
    u = metrics.get("units", "units")
    s0, s1 = metrics["skate_before"], metrics["skate_after"]
    red = f" ({-100.0 * metrics['skate_reduction']:+.1f}%)" if s0 > 0 else ""
    rows = [
        ("input", f"{src} ({metrics['frames']} frames)"),
        ("feet", f"{', '.join(metrics['feet'])}: {metrics['contacts']} contacts, "
                 f"{metrics['contact_frames']} contact frames"),
        ("foot skate", f"{s0:.4g} -> {s1:.4g} {u}/s mean horizontal foot speed in contacts{red}"),
        ("max joint speed", f"{_deg(metrics['max_angular_speed_before'])} "
                            f"({metrics['max_angular_speed_before_joint']}) -> "
                            f"{_deg(metrics['max_angular_speed_after'])} ({metrics['max_angular_speed_after_joint']})"),
        ("hips lowered", f"up to {metrics['hips_drop_max']:.4g} {u}"),
        ("wrote", out),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        ui.print(f"{k.ljust(width)}  {v}")


# ==================================================================== reach
def add_reach_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--effector", required=True, metavar="NAME", help="joint that reaches (e.g. RightWrist)")
    p.add_argument("--target", required=True, type=_xyz, metavar="X,Y,Z",
                   help="new world target, file units (negative first value: --target=-1,2,3)")
    p.add_argument("--frames", required=True, type=_frame_range, metavar="A:B",
                   help="frames (0-based, inclusive) where the effector holds the target")
    p.add_argument("--blend", type=int, metavar="N",
                   help=f"frames to blend in before A and out after B (default {mocap.DEFAULT_REACH_BLEND_S:g} s)")
    p.add_argument("--chain", metavar="START",
                   help="solve the chain from START (e.g. a spine joint) to the effector with CCD "
                        "instead of two-bone IK on the arm")
    p.add_argument("--free-orientation", action="store_true",
                   help="let the effector turn with its parent instead of keeping its animated orientation")


def reach_motion(m: Motion, args: argparse.Namespace) -> tuple[Skeleton, Clip, dict[str, Any]]:
    if args.blend is not None and args.blend < 0:
        raise CliError(f"--blend must be >= 0 frames, got {args.blend}")
    a, b = args.frames
    if b >= m.clip.n_frames:
        raise CliError(f"--frames {a}:{b}: the clip has frames 0:{m.clip.n_frames - 1}")
    res = mocap.reach(m.skeleton, m.clip, args.effector, args.target, (a, b), blend=args.blend, chain=args.chain,
                      keep_orientation=not args.free_orientation)
    metrics = dict(res.metrics)
    metrics["target"] = list(args.target)
    metrics["units"] = units_guess(m.skeleton)[0]
    return m.skeleton, res.clip, metrics


#: ``reach`` warns when the effector ends farther than this from the target
#: (relative to the figure's height): the target is out of the arm's reach.
REACH_WARN_RTOL = 1e-6


def report_reach(ui: UI, src: str, out: str, metrics: dict[str, Any]) -> None:
    u = metrics.get("units", "units")
    a, b = metrics["range"]
    rows = [
        ("input", f"{src} ({metrics['frames']} frames)"),
        ("effector", f"{metrics['effector']} -> ({', '.join(f'{x:g}' for x in metrics['target'])})"
                     f" over frames {a}:{b}, blend {metrics['blend']} frames"),
        ("error", f"{metrics['max_error']:.3g} {u} (largest over {a}:{b})"),
        ("moved", f"up to {metrics['moved_max']:.4g} {u} from the animation"),
        ("max joint speed", f"{_deg(metrics['max_angular_speed_before'])} -> "
                            f"{_deg(metrics['max_angular_speed_after'])}"),
        ("wrote", out),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        ui.print(f"{k.ljust(width)}  {v}")


# ============================================================ shared runner
def transform(command: str, m: Motion, args: argparse.Namespace) -> tuple[Skeleton, Clip, dict[str, Any]]:
    """The work of a file command on one motion."""
    if command == "footlock":
        return footlock_motion(m, args)
    if command == "reach":
        return reach_motion(m, args)
    if command == "convert":
        return convert_motion(m, args)
    raise CliError(f"unknown command {command!r}")


def _run_file_command(command: str, args: argparse.Namespace, ui: UI) -> int:
    out = args.output
    inputs = [args.input] if args.input else []
    check_output(out, inputs, args.force)  # before any work: fail fast
    even = format_of(out) == "bvh"
    with ui.status("loading (the first run also compiles kinema's kernels; cached afterwards)") as st:
        m = read_input(args, even_frames=even)
        st.describe(f"{command}: {m.source}")
        t0 = time.perf_counter()
        sk, clip, metrics = transform(command, m, args)
        metrics["seconds"] = time.perf_counter() - t0
        st.describe(f"writing {out}")
        save_motion(out, sk, clip, name=m.clip_name, mesh=getattr(args, "mesh", None), inputs=inputs,
                    force=args.force)
    if getattr(args, "json", False):
        metrics["output"] = out
        metrics["input"] = m.source
        ui.print(json.dumps(metrics, indent=2))
    elif command == "footlock":
        report_footlock(ui, m.source, out, metrics)
    elif command == "reach":
        report_reach(ui, m.source, out, metrics)
        if metrics["max_error"] > REACH_WARN_RTOL * max(units_guess(sk)[2], 1e-12):
            ui.note(f"warning: the effector misses the target by up to {metrics['max_error']:.4g} "
                    f"{metrics['units']} (out of reach)")
    else:
        ui.print(f"wrote {out} ({metrics['joints']} joints, {metrics['frames']} frames at {metrics['fps']:.6g} fps)")
    return 0


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
    ui.print(f"wrote {args.output} (DeepMimic {args.name}: {m.skeleton.n_joints} joints, {m.clip.n_frames} frames "
             f"at {m.clip.fps:.6g} fps, metres, Y up)")
    return 0


#: The temporary folder of the file a batch worker is processing (None between
#: files): what a stopped worker removes before it exits (see ``_batch``).
_WORK_DIR: str | None = None


def stop_worker(signum: int, frame: Any) -> None:
    """SIGTERM in a batch worker: remove its temporary folder and exit now.

    Workers never write into the output folder (the parent writes every
    output), so ending one mid-file loses nothing; exiting at once (rather
    than raising) keeps the pool from handing it the next file.
    """
    import shutil

    if _WORK_DIR is not None:
        shutil.rmtree(_WORK_DIR, ignore_errors=True)
    os._exit(128 + signum)


def process_file(command: str, argv: list[str], name: str, data: bytes | None, out_ext: str,
                 path: str | None = None, work_root: str | None = None) -> dict[str, Any]:
    """Batch worker: run ``command`` (with option list ``argv``) on one input file.

    Two modes, one computation (so the output does not depend on the engine):

    * ``data`` given (Dask: the worker may be on another machine): the input's
      bytes come in and the output's bytes go back (``"data"``);
    * ``data`` None (local pool): the input is read from ``path`` and the
      output is left in a private temporary folder whose paths come back
      (``"path"``, ``"dir"``; the parent copies the file into place atomically
      and removes the folder).  Only small messages cross the pool's pipes,
      so a worker stopped by Ctrl-C can never leave a half-sent message that
      would hang the pool.  The folder is made inside ``work_root``, a
      folder the parent owns and removes when the batch ends however it ends,
      so a result lost to Ctrl-C cannot leave its folder behind.

    The input is copied into the temporary folder under its own name and
    processed by the same code as the single-file command.  Returns
    ``{"ok": True, "metrics": {...}, "seconds": s, ...}`` or
    ``{"ok": False, "error": "one line", "seconds": s}``.
    """
    import shutil
    import tempfile

    from ._app import build_parser

    global _WORK_DIR
    t0 = time.perf_counter()
    src = name
    tmp = tempfile.mkdtemp(prefix="kinema-batch-", dir=work_root)
    _WORK_DIR = tmp
    keep = False
    try:
        if data is None:
            if path is None:
                raise ValueError("process_file needs data or path")
            shutil.copyfile(path, os.path.join(tmp, os.path.basename(name)))
        else:
            with open(os.path.join(tmp, os.path.basename(name)), "wb") as f:
                f.write(data)
        src = os.path.join(tmp, os.path.basename(name))
        out = os.path.join(tmp, "out" + out_ext)
        args = build_parser().parse_args(command_argv(command, src, out, argv))
        m = load_motion(src, clip_name=args.clip, fps=getattr(args, "fps", None), even_frames=format_of(out) == "bvh")
        sk, clip, metrics = transform(command, m, args)
        save_motion(out, sk, clip, name=m.clip_name, mesh=getattr(args, "mesh", None), inputs=[src])
        res: dict[str, Any] = {"ok": True, "metrics": metrics, "seconds": time.perf_counter() - t0}
        if data is None:
            res.update(path=out, dir=tmp)
            keep = True
        else:
            with open(out, "rb") as f:
                res["data"] = f.read()
        return res
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # a failed file is reported; the batch goes on
        from ._app import one_line

        return {"ok": False, "error": one_line(e).replace(src, name), "seconds": time.perf_counter() - t0}
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
        _WORK_DIR = None
