"""``kinema batch``: one command over every matching file of a folder, on a pool or on Dask.

Engines (same outputs, byte for byte, whichever runs):

* serial (``--workers 1``): in this process;
* local (``--workers N``, default): a process pool of N spawned workers;
* Dask (``--dask tcp://HOST:PORT`` or ``--dask local``): tasks on a Dask
  cluster (``kinema[dask]``); ``local`` starts a ``LocalCluster`` of
  ``--workers`` (default 2) single-threaded worker processes.

Every task is :func:`kinema.cli._worker.process_file`: it gets the input's
bytes and returns the output's bytes on Dask (so workers need no shared file
system; a remote cluster needs kinema installed, nothing else); local
workers read the input file and leave the output in a private temporary
folder, so only small messages cross the pool's pipes.  This process writes
each output atomically as its task finishes; an existing output is skipped
unless ``--force`` (an interrupted batch resumes where it stopped), a failed
file (bad input, a FIFO or a device included, or an output that cannot be
written: a folder or a symlink in its place, a read-only folder, a full
disk, any job's input) is reported and the rest go on (a pool worker that
dies fails its files and the pool is started afresh), and a summary table
ends the run.

SIGINT (Ctrl-C) and SIGTERM stop the workers and remove the batch's
temporary folder; workers also stop by themselves when this process dies
(:func:`kinema.cli._worker.worker_init`).
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from ..errors import KinemaError
from ..io._atomic import atomic_write, same_file
from ..io._read import read_regular
from ._commands import command_argv
from ._files import FORMATS, CliError, Interrupted, UsageError, make_folders, remove_empty_folders
from ._parser import build_parser
from ._status import EXIT_FAILED, EXIT_MISSED, EXIT_OK
from ._ui import UI, one_line
from ._worker import process_file, worker_init

__all__ = ["run_batch", "find_jobs", "Job"]

#: Files in flight per worker (read ahead so no worker waits, without reading the whole folder).
IN_FLIGHT_PER_WORKER = 2

#: Copy buffer when installing a worker's output file.
CHUNK_BYTES = 1 << 20

#: Workers of ``--dask local`` when ``--workers`` is not given.
DASK_LOCAL_WORKERS = 2


@dataclass(frozen=True)
class Job:
    name: str  # path relative to the input folder (shown in the summary)
    src: str
    dst: str


def find_jobs(in_dir: str, out_dir: str, patterns: list[str], to: str | None, recursive: bool) -> list[Job]:
    """Matching input files and their outputs (same relative path, extension ``to`` or the input's)."""
    jobs: list[Job] = []
    out_real = os.path.realpath(out_dir)
    for root, dirs, files in os.walk(in_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                         and os.path.realpath(os.path.join(root, d)) != out_real)
        if not recursive:
            dirs[:] = []
        for f in sorted(files):
            if f.startswith(".") or not any(fnmatch.fnmatch(f.lower(), p.lower()) for p in patterns):
                continue
            if os.path.splitext(f)[1].lower() not in FORMATS:
                continue
            src = os.path.join(root, f)
            rel = os.path.relpath(src, in_dir)
            stem, ext = os.path.splitext(rel)
            dst = os.path.join(out_dir, stem + ("." + to if to else ext))
            jobs.append(Job(rel, src, dst))
    seen: dict[str, str] = {}
    for j in jobs:
        key = os.path.normcase(os.path.abspath(j.dst))
        if key in seen:
            raise CliError(f"{seen[key]} and {j.name} would both write {j.dst}; use --pattern to pick one")
        seen[key] = j.name
    return jobs


# ------------------------------------------------------------------ engines
#: Seconds a stopped pool worker gets to exit after SIGTERM before it is killed.
WORKER_STOP_TIMEOUT_S = 5.0
#: Seconds between the local pool's looks at the Ctrl-C flag while it waits for results.
CTRL_C_POLL_S = 0.05


class _Serial:
    name = "serial"
    ships_bytes = False  # workers read the input files themselves

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        f: Future[Any] = Future()
        f.set_result(fn(*args))
        return f

    def wait_first(self, futures: list[Any]) -> Iterable[Any]:
        return futures

    def result(self, f: Any) -> Any:
        return f.result()

    def close(self, cancel: bool) -> None:
        pass


class _Pool:
    ships_bytes = False

    def __init__(self, workers: int, work_root: str | None) -> None:
        self.name = f"local pool, {workers} workers"
        self._workers, self._work_root = workers, work_root
        self._ex = self._new_pool()
        # Ctrl-C and SIGTERM only set a flag while the pool runs; wait_first raises at a safe point.
        # (Raised inside concurrent.futures' wait, it can leave a future's lock held, and the pool's
        # shutdown then waits forever: a batch hung on Ctrl-C once in CI.)
        self._interrupted: int | None = None
        self._old_handlers: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)

    def _new_pool(self) -> ProcessPoolExecutor:
        import multiprocessing

        # spawn: workers start clean (no inherited threads or numba state), the same on every OS.
        return ProcessPoolExecutor(max_workers=self._workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=worker_init, initargs=(os.getpid(), self._work_root))

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._interrupted = signum

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        try:
            return self._ex.submit(fn, *args)
        except BrokenProcessPool:
            # A worker died (killed, out of memory): the files in flight have failed ("worker failed");
            # the rest go to a fresh pool.  The broken pool has already stopped its other workers.
            self._ex.shutdown(wait=True)
            self._ex = self._new_pool()
            return self._ex.submit(fn, *args)

    def wait_first(self, futures: list[Any]) -> Iterable[Any]:
        while self._interrupted is None:
            done = wait(futures, timeout=CTRL_C_POLL_S, return_when=FIRST_COMPLETED).done
            if done:
                return done
        if self._interrupted == signal.SIGINT:
            raise KeyboardInterrupt
        raise Interrupted(self._interrupted)

    def result(self, f: Any) -> Any:
        return f.result()

    def close(self, cancel: bool) -> None:
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old)
        self._old_handlers = {}
        if not cancel:
            self._ex.shutdown(wait=True)
            return
        # Stop work in progress (its output would be dropped anyway): cancel what is queued,
        # SIGTERM the workers (they remove their temporary folders and exit), kill stragglers.
        procs = list(getattr(self._ex, "_processes", {}).values())
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=WORKER_STOP_TIMEOUT_S)
            if p.is_alive():
                p.kill()
                p.join(timeout=WORKER_STOP_TIMEOUT_S)
        self._ex.shutdown(wait=True, cancel_futures=True)


class _Dask:
    ships_bytes = True  # a remote worker may not see this file system

    def __init__(self, address: str, workers: int | None, timeout: float) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise CliError("--dask needs dask.distributed: pip install 'kinema[dask]'") from None
        import logging

        self._cluster: Any = None
        if address == "local":
            n = workers or DASK_LOCAL_WORKERS
            self._cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                                         silence_logs=logging.ERROR)
            self._client = Client(self._cluster)
            self.name = f"dask LocalCluster, {n} workers"
        else:
            try:
                self._client = Client(address, timeout=timeout)
            except Exception as e:
                raise CliError(f"cannot connect to the Dask scheduler at {address} within {timeout:g} s "
                               f"(--dask-timeout): {one_line(e)}") from None
            n_workers = len(self._client.scheduler_info().get("workers", {}))
            self.name = f"dask {address}, {n_workers} workers"
        self.n_workers = len(self._client.scheduler_info().get("workers", {})) or 1

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self._client.submit(fn, *args, pure=False)

    def wait_first(self, futures: list[Any]) -> Iterable[Any]:
        from distributed import wait as dwait

        return dwait(futures, return_when="FIRST_COMPLETED").done

    def result(self, f: Any) -> Any:
        return f.result()

    def close(self, cancel: bool) -> None:
        try:
            self._client.close()
        finally:
            if self._cluster is not None:
                self._cluster.close()


# -------------------------------------------------------------------- batch
def _install(res: dict[str, Any], job: Job) -> None:
    """Write a finished file's output into place atomically (from bytes, or from the worker's folder).

    Raises ``OSError`` or :class:`CliError` when it cannot (the caller records the file as failed):
    a folder or a symlink at the output path (a batch never writes through a link: it could point
    anywhere), a read-only folder, a full disk.  A subfolder made for it is removed again then.
    """
    try:
        if os.path.islink(job.dst):
            raise CliError(f"{job.dst}: is a symlink; batch does not write through links (remove it)")
        if os.path.isdir(job.dst):
            raise CliError(f"{job.dst}: is a folder, not a file")
        created = make_folders(os.path.dirname(os.path.abspath(job.dst)))
        try:
            with atomic_write(job.dst, mode="wb", inputs=[job.src]) as f:
                if "data" in res:
                    f.write(res["data"])
                else:
                    with open(res["path"], "rb") as src:
                        shutil.copyfileobj(src, f, CHUNK_BYTES)
        except BaseException:
            remove_empty_folders(created)
            raise
    finally:
        if "dir" in res:
            _remove_dir(res["dir"])


def _remove_dir(path: str) -> None:
    """``rmtree`` that a Ctrl-C cannot cut short (SIGINT is held until it is done, on POSIX)."""
    block = hasattr(signal, "pthread_sigmask")
    if block:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        shutil.rmtree(path, ignore_errors=True)
    finally:
        if block:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _identity(path: str) -> object:
    """What tells files apart: device and inode when ``path`` exists (links included), else its real path."""
    try:
        st = os.stat(path)
    except OSError:
        return os.path.realpath(path)
    return st.st_dev, st.st_ino


def _fail(rows: dict[str, tuple[str, str, str, str, str]], ui: UI, job: Job, error: str, seconds: str) -> None:
    rows[job.name] = (job.name, "FAILED", "", error, seconds)
    ui.note(f"kinema batch: {job.name}: {error}")


def _check_options(command: str, extra: list[str]) -> None:
    """Validate the command's options once, before any work (one-line error on a bad one)."""
    for bad in ("-o", "--output", "--sample", "--force", "--json"):
        if any(x == bad or x.startswith(bad + "=") for x in extra):
            raise UsageError(f"batch sets {bad} itself; remove it from the {command} options")
    build_parser().parse_args(command_argv(command, "input.bvh", "output.bvh", extra))


def _describe(command: str, res: dict[str, Any]) -> tuple[str, str]:
    """``(frames, result)`` columns of the summary for one finished file (the same figures as the command's)."""
    m = res.get("metrics", {})
    frames = str(m.get("frames", ""))
    u = m.get("units", "")
    miss = (f"missed by {m['error_max_units']:.4g} {u} (tolerance {m['tolerance_units']:.3g} {u}); "
            if m.get("status") == "missed" else "")
    if command == "footlock":
        s0, s1 = m["skate_before_units_per_s"], m["skate_after_units_per_s"]
        red = f" ({-m['skate_reduction_percent']:+.1f}%)" if s0 > 0 else ""
        return frames, f"{miss}skate {s0:.3g} -> {s1:.3g} {u}/s{red}"
    if command == "reach":
        return frames, miss or f"error {m['error_max_units']:.3g} {u}"
    return frames, f"{m.get('joints', '')} joints"


def run_batch(args: argparse.Namespace, extra: list[str], ui: UI) -> int:
    """Run ``args.command`` over the folder; returns 0 (all ok or skipped), 3 (some missed) or 1 (some failed)."""
    command = args.command
    in_dir, out_dir = args.input_dir, args.output
    if not os.path.isdir(in_dir):
        raise CliError(f"{in_dir}: no such folder")
    if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        raise CliError(f"{out_dir}: exists and is not a folder")
    if os.path.isdir(out_dir) and same_file(in_dir, out_dir):
        raise CliError("the output folder is the input folder: outputs would replace their inputs")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be >= 1, got {args.workers}")
    _check_options(command, extra)
    patterns = args.pattern or ["*.bvh", "*.gltf", "*.glb"]
    to = args.to.lstrip(".").lower() if args.to else None
    if to is not None and "." + to not in FORMATS:
        raise UsageError(f"--to must be bvh, gltf or glb, got {args.to!r}")
    jobs = find_jobs(in_dir, out_dir, patterns, to, args.recursive)
    if not jobs:
        raise CliError(f"{in_dir}: no files match {', '.join(patterns)}")

    rows: dict[str, tuple[str, str, str, str, str]] = {}
    todo: list[Job] = []
    inputs = {_identity(j.src): j for j in jobs}
    for j in jobs:
        src_job = inputs.get(_identity(j.dst))
        if src_job is not None:  # never overwrite an input, even with --force (an output folder above the input's)
            _fail(rows, ui, j, f"refusing to overwrite {j.dst}: it is the input {src_job.name}", "")
        elif os.path.lexists(j.dst) and not args.force:
            rows[j.name] = (j.name, "skipped", "", "output exists (--force redoes it)", "")
        else:
            todo.append(j)

    t_start = time.perf_counter()
    where = "nothing to run"
    # The output folder is made only once the engine is up (a Dask scheduler that cannot be
    # reached leaves nothing behind), and removed again at the end if it is still empty.
    created: list[str] = []
    try:
        if todo:
            dask = _Dask(args.dask, args.workers, float(args.dask_timeout)) if args.dask else None
            try:
                created = make_folders(out_dir)
            except BaseException:
                if dask is not None:
                    dask.close(cancel=True)
                raise
            where = _run_jobs(command, extra, todo, dask, args.workers, rows, ui)
    finally:
        remove_empty_folders(created)
    wall = time.perf_counter() - t_start

    counts = {status: sum(1 for r in rows.values() if r[1] == status)
              for status in ("ok", "missed", "FAILED", "skipped")}
    ui.table(("file", "status", "frames", "result", "s"), [rows[j.name] for j in jobs],
             title=f"kinema batch {command}: {in_dir} -> {out_dir}", align="llrlr")
    ui.print(f"{counts['ok']} ok, {counts['missed']} missed, {counts['FAILED']} failed, {counts['skipped']} skipped "
             f"in {wall:.2f} s ({where})")
    if counts["FAILED"]:
        return EXIT_FAILED
    return EXIT_MISSED if counts["missed"] else EXIT_OK


def _run_jobs(command: str, extra: list[str], todo: list[Job], dask: _Dask | None, workers: int | None,
              rows: dict[str, tuple[str, str, str, str, str]], ui: UI) -> str:
    """Run ``todo`` on ``dask``, a local pool or in this process, filling ``rows``; returns the engine's name."""
    # Local workers put their per-file folders in here; removing it at the end
    # (finished, failed or interrupted) also removes the folders of results
    # that were in flight when the pool was stopped.
    work_root = None if dask is not None else tempfile.mkdtemp(prefix="kinema-batch-")
    engine: Any = dask
    try:
        if dask is not None:
            window = IN_FLIGHT_PER_WORKER * dask.n_workers
        elif (workers or os.cpu_count() or 1) == 1 or len(todo) == 1:
            engine, window = _Serial(), 1
        else:
            n = min(workers or os.cpu_count() or 1, len(todo))
            engine, window = _Pool(n, work_root), IN_FLIGHT_PER_WORKER * n
        pending: dict[Any, Job] = {}
        queue = iter(todo)
        with ui.progress(len(todo), f"{command} ({engine.name})") as bar:
            def finish(job: Job, res: dict[str, Any]) -> None:
                if res["ok"]:
                    try:
                        _install(res, job)
                    except (OSError, CliError) as e:  # this output cannot be written: the others go on
                        res = {"ok": False, "error": f"cannot write the output: {one_line(e)}",
                               "seconds": res["seconds"]}
                if res["ok"]:
                    frames, result = _describe(command, res)
                    status = "missed" if res["metrics"].get("status") == "missed" else "ok"
                    rows[job.name] = (job.name, status, frames, result, f"{res['seconds']:.2f}")
                else:
                    _fail(rows, ui, job, res["error"], f"{res['seconds']:.2f}")
                bar.advance()

            def fill() -> None:
                while len(pending) < window:
                    job = next(queue, None)
                    if job is None:
                        return
                    ext = os.path.splitext(job.dst)[1]
                    data: bytes | None = None
                    path: str | None = os.path.abspath(job.src)
                    if engine.ships_bytes:
                        try:  # regular files only, as the loaders read them (a FIFO would hang, /dev/zero never ends)
                            data, path = read_regular(job.src), None
                        except (OSError, KinemaError) as e:
                            finish(job, {"ok": False, "error": one_line(e).replace(job.src, job.name),
                                         "seconds": 0.0})
                            continue
                    pending[engine.submit(process_file, command, extra, job.name, data, ext, path,
                                          work_root)] = job

            fill()
            while pending:
                for fut in list(engine.wait_first(list(pending))):
                    job = pending.pop(fut)
                    try:
                        res = engine.result(fut)
                    except Exception as e:  # the worker itself died (e.g. out of memory)
                        res = {"ok": False, "error": f"worker failed: {one_line(e)}", "seconds": 0.0}
                    finish(job, res)
                fill()
    except BaseException:
        if engine is not None:
            engine.close(cancel=True)  # finished-but-not-installed outputs go with work_root below
        raise
    finally:
        if work_root is not None:
            _remove_dir(work_root)
    engine.close(cancel=False)
    return str(engine.name)
