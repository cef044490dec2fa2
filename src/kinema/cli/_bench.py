"""``kinema bench``: the benchmark suite side by side with its peers, footlock alone, or the
pytest-benchmark suite with ``--suite``.

``kinema bench [--quick] [--json FILE] [--plot FILE]`` runs every workload of
:mod:`kinema.bench._suite` on the problems of :mod:`kinema._problems` (the tests' problems), each
beside its baselines in the same run, and prints one table row per workload with the ratios; the
parallel rows are run again beside a busy process.  ``--json`` writes the rows, ``--plot`` the two
pictures (matplotlib).  ``--frames N`` (or ``--batch``) keeps the earlier built-in benchmark: it
repeats the bundled DeepMimic walk into a long clip and times :func:`kinema.mocap.footlock` on it
(best of ``--repeat``), next to forward kinematics of the same clip as a yardstick; ``--batch``
adds batch scaling over 1 and 2 workers.  The pytest-benchmark suite (``benchmarks/`` in the source
tree) needs pytest-benchmark.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

from .._problems import long_walk, repeat_clip
from ..io._atomic import atomic_write, work_folder
from ._files import CliError, UsageError, check_folder_of, make_folders, remove_empty_folders
from ._ui import UI

__all__ = ["run_bench", "long_walk", "repeat_clip", "plot_paths"]

#: Default repeats of the footlock-alone benchmark (best kept).
FOOTLOCK_REPEATS = 3
#: Default length of the footlock-alone clip (frames).
FOOTLOCK_FRAMES = 100_000


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
    with work_folder("bench") as tmp:
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
    from .._kernels._tier import compile_always

    compile_always()  # time compiled kernels only, never the plain ones (kinema._kernels._tier)
    if args.suite:
        folder = args.suite
        if not os.path.isdir(folder):
            raise CliError(f"benchmark suite {folder!r} not found: it ships with the source tree "
                           "(run from the repository root, or use the built-in benchmark: kinema bench)")
        ui.print(f"running the pytest-benchmark suite in {folder}/ (python -m pytest {folder} --benchmark-only)")
        return subprocess.call([sys.executable, "-m", "pytest", folder, "--benchmark-only", "-q"])
    if args.frames is None and not args.batch:
        return run_suite_command(args, ui)
    frames = FOOTLOCK_FRAMES if args.frames is None else args.frames
    repeat = FOOTLOCK_REPEATS if args.repeat is None else args.repeat
    if frames < 100:
        raise UsageError(f"--frames must be at least 100, got {frames}")
    from .. import mocap
    from ..fk import forward_kinematics

    ui.print("kinema bench: built-in quick benchmark (kinema bench without --frames runs the whole suite)")
    sk, clip = long_walk(frames)
    n = clip.n_frames
    with ui.status("compiling kernels (first run only)"):
        # Each timed function once before it is timed, so that no timed run includes compiling (or loading from
        # numba's cache) its kernels: footlock on a short clip; FK on the timed clip itself, as FK runs a
        # parallel driver, compiled apart, only from FK_PARALLEL_MIN_JOINTS joint transforms (a short clip's
        # warm-up would leave that compile, seconds on a cold cache, in the timed row).
        mocap.footlock(sk, long_walk(200)[1])
        forward_kinematics(sk, clip.pose)
    rows = []
    with ui.status(f"timing footlock on {n} frames"):
        dt = _best(lambda: mocap.footlock(sk, clip), repeat)
        rows.append((f"footlock, DeepMimic walk repeated to {n} frames ({sk.n_joints} joints)", f"{dt:.3f} s",
                     f"{n / dt:,.0f} frames/s"))
        dt = _best(lambda: forward_kinematics(sk, clip.pose), repeat)
        rows.append(("forward kinematics of the same clip (yardstick)", f"{dt:.3f} s", f"{n / dt:,.0f} frames/s"))
    note = None
    if getattr(args, "batch", False):
        with ui.status("timing batch footlock with 1 and 2 workers"):
            batch_rows, note = _batch_scaling(ui, 1)
            rows.extend(batch_rows)
    ui.table(("benchmark", "best time", "throughput"), rows, align="lrr")
    ui.print(f"best of {repeat} runs; {os.cpu_count()} CPUs")
    if note is not None:
        ui.print(note)
    return 0


def plot_paths(plot: str) -> tuple[str, str]:
    """``--plot FILE``'s two outputs: FILE itself (accuracy against time per solve) and FILE with
    ``-throughput`` before its suffix (throughput against batch size): ``b.png`` -> ``b-throughput.png``."""
    stem, ext = os.path.splitext(plot)
    return plot, f"{stem}-throughput{ext or '.png'}"


def _check_outputs(paths: list[str], force: bool) -> None:
    """Refuse, before any work, an output that is a folder, exists (unless ``force``) or whose folder cannot be
    made (a missing one is made when the file is written, :func:`_write`)."""
    for path in paths:
        if os.path.isdir(path):
            raise CliError(f"{path}: is a folder; give a file name")
        if os.path.lexists(path) and not force:
            raise CliError(f"{path}: already exists; pass --force to replace it")
        check_folder_of(path)


def _check_plot(plot: str) -> None:
    """``--plot`` writes PNG: a FILE with another extension (``plot.txt``) is a usage error, not PNG data under
    a name that says otherwise."""
    if os.path.splitext(plot)[1].lower() != ".png":
        raise UsageError(f"--plot writes PNG images: give a FILE ending in .png, got {plot!r}")


def _write(path: str, data: bytes) -> None:
    """Write ``path`` atomically, making its missing folders (removed again if the write fails)."""
    created = make_folders(os.path.dirname(os.path.abspath(path)))
    try:
        with atomic_write(path, mode="wb") as f:
            f.write(data)
    except BaseException:
        remove_empty_folders(created)
        raise


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _table_rows(rows: list[dict[str, Any]]) -> tuple[list[tuple[str, ...]], list[str]]:
    """The printed table (one line per workload) and one line per peer that did not run."""
    table: list[tuple[str, ...]] = []
    notes: list[str] = []
    for r in rows:
        if not r.get("available", True):
            table.append((r["workload"], r["reason"], "", "", "", "", "", "", ""))
            continue
        if "figures" in r:  # the motion-quality sweeps: named figures, no timing columns
            table.append((r["workload"], f"{r['items']} figures in {r['seconds']:.1f} s", "", "", "", "", "", "", ""))
            notes += [f"{r['workload']}: {k} = {v:.4g}" for k, v in r["figures"].items()]
            continue
        ratios = ", ".join(f"{k[len('ratio_vs_'):]} {v:,.1f}x" for k, v in r.items() if k.startswith("ratio_vs_"))
        iqr = r["single_call_us_iqr"]
        single = "-" if r["single_call_us"] is None else f"{r['single_call_us']:.1f} [{iqr[0]:.1f}-{iqr[1]:.1f}]"
        busy = f"{r['busy']['solves_per_s']:,.0f} (x{r['busy_over_quiet']:.2f})" if "busy" in r else "-"
        table.append((r["workload"], f"{r['solves_per_s']:,.0f} {r['unit']}/s", single,
                      _num(r["within_1e-3"], ".3f"), _num(r["within_1e-4"], ".3f"), _num(r["median_error"], ".1e"),
                      _num(r["worst_error"], ".1e"), ratios or "-", busy))
        for name, entry in r["peers"].items():
            if not entry.get("available"):
                notes.append(f"{r['workload']}: {name}: {entry['reason']}")
    return table, notes


def _report(ui: UI, result: dict[str, Any]) -> None:
    table, notes = _table_rows(result["rows"])
    ui.table(("workload", "kinema /s (quiet)", "single call us [IQR]", "<=1e-3", "<=1e-4", "median err",
              "worst err", "ratio vs peer", "/s beside busy (busy/quiet)"),
             table, align="lrrrrrrll")
    for r in result["rows"]:
        if r.get("available", True):
            ui.print(f"  {r['workload']}: {r['title']}")
    for line in notes:
        ui.print(f"  {'figure' if line.startswith('motion_sweeps:') else 'peer absent'}: {line}")
    ui.print("  ratio vs peer: the peer's time per item over kinema's in the same mode (batch, or one call each); "
             "above 1, kinema is faster")
    load = ", ".join(f"{x:.2f}" for x in result["load_average"])
    ui.print(f"medians of {result['repeats']} runs (IQR in brackets); {result['cpus']} CPUs; load average {load}; "
             f"{result['seconds']:.1f} s in all")


def run_suite_command(args: argparse.Namespace, ui: UI) -> int:
    """``kinema bench [--quick] [--json FILE] [--plot FILE]``: the suite, its table, its files."""
    from ..bench import _suite

    if args.plot:
        _check_plot(args.plot)
    outputs = ([args.json] if args.json else []) + (list(plot_paths(args.plot)) if args.plot else [])
    _check_outputs(outputs, args.force)
    if args.plot:
        try:
            from ..bench import _plot

            _plot.pyplot()
        except ImportError:
            raise CliError('--plot needs matplotlib: pip install "kinema[bench]"') from None
    if args.repeat is not None and args.repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {args.repeat}")
    sizes = _suite.QUICK if args.quick else _suite.FULL
    if args.repeat is not None:
        sizes = _suite.Sizes(**{**sizes.__dict__, "repeats": args.repeat})
    ui.print(f"kinema bench: the {'quick ' if args.quick else ''}suite, kinema beside its peers in one run")
    with ui.status("building the problems") as progress:
        result = _suite.run_suite(sizes, quick=args.quick, status=progress.describe)
    _report(ui, result)
    if args.plot:
        accuracy_png, throughput_png = plot_paths(args.plot)
        with ui.status("plots: accuracy against time per solve") as progress:
            iterations = (5, 20) if args.quick else (2, 5, 10, 20, 50)
            batches = (1, 100, 1000) if args.quick else (1, 10, 100, 1000, 10_000)
            points = _suite.chain_accuracy_curves(sizes, iterations, status=progress.describe)
            curves = _suite.batch_size_curves(sizes, batches, status=progress.describe)
        _write(accuracy_png, _plot.plot_accuracy(points, f"10-bone chain, {sizes.chain_targets} reachable targets: "
                                                         "median error against time per solve (labels: iterations)"))
        _write(throughput_png, _plot.plot_throughput(curves, "throughput against batch size (one call per batch)"))
        result["plot"] = {"accuracy": points, "throughput": curves, "files": [accuracy_png, throughput_png]}
        ui.print(f"wrote {accuracy_png} and {throughput_png}")
    if args.json:
        _write(args.json, (json.dumps(result, indent=1) + "\n").encode())
        ui.print(f"wrote {args.json}")
    return 0
