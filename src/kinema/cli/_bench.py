"""``kinema bench``: a quick built-in benchmark, or the pytest-benchmark suite with ``--suite``.

The built-in benchmark needs nothing but kinema: it repeats the bundled
DeepMimic walk into a long clip and times :func:`kinema.mocap.footlock` on it
(frames per second, best of ``--repeat``), next to forward kinematics of the
same clip as a yardstick; ``--batch`` adds batch scaling over 1 and 2 workers.
The suite (``benchmarks/`` in the source tree) compares kinema with baselines
side by side and needs pytest-benchmark.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

from ..pose import Clip, Pose
from ._files import CliError
from ._ui import UI

__all__ = ["run_bench", "long_walk", "repeat_clip"]


def repeat_clip(clip: Clip, n_frames: int, root: int = 0) -> Clip:
    """``clip`` repeated to ``n_frames`` frames; the root keeps walking (each loop starts where the last ended)."""
    if clip.times is not None:
        raise ValueError("repeat_clip needs evenly spaced frames")
    full = clip.pose.broadcast()
    f = clip.n_frames
    reps = -(-n_frames // f)
    t = np.tile(full.translations, (reps, 1, 1))[:n_frames]
    r = np.tile(full.rotations, (reps, 1, 1))[:n_frames]
    s = np.tile(full.scales, (reps, 1, 1))[:n_frames]
    step = full.translations[-1, root] - full.translations[0, root]
    step[1] = 0.0  # keep the height; advance horizontally
    loop = np.repeat(np.arange(reps), f)[:n_frames]
    # one more frame's travel per loop, so the seam does not stand still for a frame
    travel = step + (full.translations[-1, root] - full.translations[-2, root]) * np.array([1.0, 0.0, 1.0])
    t[:, root] += loop[:, None] * travel
    return Clip(Pose(t, r, s), clip.fps)


def long_walk(n_frames: int) -> tuple[Any, Clip]:
    from .. import samples

    sk = samples.humanoid()
    return sk, repeat_clip(samples.clip("walk"), n_frames, sk.index("root"))


def _best(fn: Any, repeat: int) -> float:
    best = float("inf")
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _batch_scaling(ui: UI, repeat: int) -> tuple[list[tuple[str, str, str]], str]:
    """Rows for batch footlock with 1 and 2 workers, the pool's start-up on its own, and a note saying
    what the figures mean (1 worker runs in this process with numba's threads; pool workers are fresh
    processes of one numba thread each, which pay a start-up)."""
    from .. import samples
    from ._batch import run_batch
    from ._parser import build_parser

    rows = []
    times: dict[tuple[str, int], float] = {}
    with tempfile.TemporaryDirectory(prefix="kinema-bench-") as tmp:
        sk = samples.humanoid()
        base = samples.clip("walk")
        from ..io import save_bvh

        for folder, n_files, frames in (("in", 8, 20_000), ("tiny", 2, 40)):
            os.makedirs(os.path.join(tmp, folder))
            for i in range(n_files):
                save_bvh(os.path.join(tmp, folder, f"walk_{i}.bvh"), sk, repeat_clip(base, frames, sk.index("root")))
        for folder, workers in (("in", 1), ("in", 2), ("tiny", 2)):
            def run(w: int = workers, src: str = os.path.join(tmp, folder), tag: str = folder) -> None:
                out = os.path.join(tmp, f"out-{tag}-{w}")
                args, extra = build_parser().parse_known_args(["batch", "footlock", src, "-o", out, "--workers",
                                                               str(w), "--force"])
                code = run_batch(args, extra, UI(quiet=True, progress=False))
                if code:
                    raise CliError(f"batch with {w} workers failed (exit {code})")

            times[(folder, workers)] = _best(run, repeat)
    frames = 8 * 20_000
    for workers in (1, 2):
        dt = times[("in", workers)]
        rows.append((f"batch footlock, 8 files x 20000 frames, {workers} worker(s)", f"{dt:.2f} s",
                     f"{frames / dt:,.0f} frames/s"))
    startup = times[("tiny", 2)]
    rows.append(("batch start-up: 2 workers on 2 tiny files", f"{startup:.2f} s", ""))
    work = times[("in", 2)] - startup
    note = (f"1 worker runs in this process, where numba uses all {os.cpu_count()} CPUs; each pool worker is a "
            f"fresh process running numba on one thread, and starting the pool (spawn, imports, kernels from "
            f"the cache) takes about {startup:.2f} s")
    if work > 0:
        note += f": 2 workers past their start-up did {frames / work:,.0f} frames/s"
    return rows, note + "."


def run_bench(args: argparse.Namespace, ui: UI) -> int:
    if args.suite:
        folder = args.suite
        if not os.path.isdir(folder):
            raise CliError(f"benchmark suite {folder!r} not found: it ships with the source tree "
                           "(run from the repository root, or use the built-in benchmark: kinema bench)")
        ui.print(f"running the pytest-benchmark suite in {folder}/ (python -m pytest {folder} --benchmark-only)")
        return subprocess.call([sys.executable, "-m", "pytest", folder, "--benchmark-only", "-q"])
    if args.frames < 100:
        raise CliError(f"--frames must be at least 100, got {args.frames}")
    from .. import mocap
    from ..fk import forward_kinematics

    ui.print("kinema bench: built-in quick benchmark (kinema bench --suite runs the pytest-benchmark suite)")
    with ui.status("compiling kernels (first run only)"):
        sk, short = long_walk(200)
        mocap.footlock(sk, short)
    sk, clip = long_walk(args.frames)
    n = clip.n_frames
    rows = []
    with ui.status(f"timing footlock on {n} frames"):
        dt = _best(lambda: mocap.footlock(sk, clip), args.repeat)
        rows.append((f"footlock, DeepMimic walk repeated to {n} frames ({sk.n_joints} joints)", f"{dt:.3f} s",
                     f"{n / dt:,.0f} frames/s"))
        dt = _best(lambda: forward_kinematics(sk, clip.pose), args.repeat)
        rows.append(("forward kinematics of the same clip (yardstick)", f"{dt:.3f} s", f"{n / dt:,.0f} frames/s"))
    note = None
    if getattr(args, "batch", False):
        with ui.status("timing batch footlock with 1 and 2 workers"):
            batch_rows, note = _batch_scaling(ui, 1)
            rows.extend(batch_rows)
    ui.table(("benchmark", "best time", "throughput"), rows, align="lrr")
    ui.print(f"best of {args.repeat} runs; {os.cpu_count()} CPUs")
    if note is not None:
        ui.print(note)
    return 0
