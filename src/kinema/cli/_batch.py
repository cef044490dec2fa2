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
folder, so only small messages cross the pool's pipes.  On Dask a glTF
file's external buffers (a ``.bin`` beside a ``.gltf``) go with its bytes,
read here once under the loader's rules
(:func:`kinema.io.gltf.reader.read_external`: confined to the file's folder,
regular files only), and the bytes are scattered to the workers rather than
put in the task graph.  This process writes
each output atomically as its task finishes; an existing output is skipped
unless ``--force`` (an interrupted batch resumes where it stopped), a failed
file (bad input, a FIFO or a device included, or an output that cannot be
written: a folder or a symlink in its place, a read-only folder, a full
disk, any job's input) is reported and the rest go on (a pool worker that
dies fails its files and the pool is started afresh), and a summary table
ends the run.

SIGINT (Ctrl-C) and SIGTERM stop the workers and remove the batch's
temporary folder (a ``LocalCluster``'s included: its workers, which ignore
the terminal's Ctrl-C, keep Dask's scratch space and their files there);
the command prints one line and exits 128 + the signal.  Pool workers also
stop by themselves, and remove the batch's folder, when this process dies
(:func:`kinema.cli._worker.worker_init`); a ``LocalCluster``'s stop too
(Dask's own watch) but leave their folder.  An output never replaces an
input, nor a glTF buffer file its task read.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fnmatch
import os
import shutil
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from ..errors import KinemaError
from ..io._atomic import atomic_write, make_work_folder, remove_stale_work_folders, same_file
from ..io._read import PATH_CHARS, file_kind, read_regular, short_repr
from ..io.gltf.reader import ExternalFiles, read_external
from ._commands import command_argv
from ._files import FORMATS, CliError, Interrupted, UsageError, format_of, make_folders, remove_empty_folders
from ._parser import build_parser
from ._status import EXIT_FAILED, EXIT_MISSED, EXIT_OK
from ._ui import UI, one_line, printable
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
#: Seconds between the local pool's (and Dask's) looks at the Ctrl-C flag while it waits for results.
CTRL_C_POLL_S = 0.05
def make_work_root() -> str:
    """A new work folder for this batch, ``kinema-batch-<pid>-<random>``, after removing those of dead batches
    (:func:`kinema.io._atomic.make_work_folder`)."""
    return make_work_folder("batch")


def remove_stale_work_roots(folder: str | None = None) -> list[str]:
    """Remove the work folders left in ``folder`` (default: the system's temporary folder) by batches that are no
    longer running; returns their paths (:func:`kinema.io._atomic.remove_stale_work_folders`)."""
    return remove_stale_work_folders("batch", folder)


#: The environment a LocalCluster's workers start with (on top of this process's).
WORKER_ENV = {"NUMBA_NUM_THREADS": "1"}

#: Seconds a stopped LocalCluster worker gets to stop by itself (0.8 of it) before it is terminated.
DASK_STOP_TIMEOUT_S = 1.0


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


class _Interruptible:
    """Ctrl-C and SIGTERM only set a flag while an engine runs; its ``wait_first`` raises at a safe point.

    (Raised inside concurrent.futures' wait, it can leave a future's lock held, and the pool's
    shutdown then waits forever: a batch hung on Ctrl-C once in CI.)
    """

    def __init__(self) -> None:
        self._interrupted: int | None = None
        self._old_handlers: dict[int, Any] = {}

    def _catch(self, *signums: int, handler: Any = None) -> None:
        """Route ``signums`` to the flag (or to ``handler``, e.g. ``SIG_IGN``) until :meth:`_release`."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in signums:
            old = signal.signal(sig, self._on_signal if handler is None else handler)
            self._old_handlers.setdefault(sig, old)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._interrupted = signum

    def _raise_if_interrupted(self) -> None:
        if self._interrupted == signal.SIGINT:
            raise KeyboardInterrupt
        if self._interrupted is not None:
            raise Interrupted(self._interrupted)

    def _release(self) -> None:
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old)
        self._old_handlers = {}


class _Pool(_Interruptible):
    ships_bytes = False

    def __init__(self, workers: int, work_root: str | None) -> None:
        super().__init__()
        self.name = f"local pool, {workers} workers"
        self._workers, self._work_root = workers, work_root
        self._ex = self._new_pool()
        self._catch(signal.SIGINT, signal.SIGTERM)

    def _new_pool(self) -> ProcessPoolExecutor:
        import multiprocessing

        # spawn: workers start clean (no inherited threads or numba state), the same on every OS.
        return ProcessPoolExecutor(max_workers=self._workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=worker_init, initargs=(os.getpid(), self._work_root))

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
        while True:
            self._raise_if_interrupted()
            done = wait(futures, timeout=CTRL_C_POLL_S, return_when=FIRST_COMPLETED).done
            if done:
                return done

    def result(self, f: Any) -> Any:
        return f.result()

    def close(self, cancel: bool) -> None:
        self._release()
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


class _Dask(_Interruptible):
    """Tasks on a Dask cluster: a ``LocalCluster`` this process starts (``local``) or a scheduler's address.

    A ``LocalCluster``'s workers keep every file (Dask's scratch space, each
    task's temporary folder) in :attr:`work_root`, which :meth:`close`
    removes after the cluster has stopped, however the batch ends.  They
    start with Ctrl-C ignored: a Ctrl-C at the terminal goes to the whole
    process group, and a worker that got it would die printing a traceback;
    this process stops them itself.  (A signal handler would not survive the
    workers' exec, ``SIG_IGN`` does; so a Ctrl-C in the seconds while they
    start is ignored here too.)
    """

    ships_bytes = True  # a remote worker may not see this file system

    def __init__(self, address: str, workers: int | None, timeout: float, n_jobs: int | None = None) -> None:
        super().__init__()
        try:
            import dask
            from distributed import Client, LocalCluster
        except ImportError:
            raise CliError("--dask needs dask.distributed: pip install 'kinema[dask]'") from None
        import logging

        self._cluster: Any = None
        self._client: Any = None
        self.work_root: str | None = None
        self._catch(signal.SIGTERM)
        try:
            if address == "local":
                # No more workers than files, as the local pool (--workers 64 for 9 files started 64 processes
                # for 35 s; 100000 exhausted the file descriptors)
                n = min(workers or DASK_LOCAL_WORKERS, n_jobs or DASK_LOCAL_WORKERS)
                self.work_root = make_work_root()
                self._catch(signal.SIGINT, handler=signal.SIG_IGN)  # inherited by the workers
                with dask.config.set({"temporary-directory": self.work_root}):  # the scheduler's scratch too
                    # One numba thread per worker, as the local pool's (kinema.cli._worker.worker_init): the
                    # workers are the parallelism; n workers each running as many numba threads as there are
                    # cores oversubscribe the machine.  The nanny sets it before the worker imports numba.
                    # No dashboard (no one opens it).  The scheduler serves its few HTTP routes anyway, and with
                    # no address it takes port 8787 or, that in use (another cluster, any server), warns
                    # "Port 8787 is already in use" on stderr even under -q: an OS-chosen localhost port instead.
                    # Dask's own logs: critical only (a worker's heartbeat ERROR and its traceback, logged as the
                    # batch is interrupted, broke the one-line "interrupted"; a failing task reaches this process
                    # as its exception and is reported per file).
                    self._cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                                 dashboard_address=None, silence_logs=logging.CRITICAL,
                                                 scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                                                 env=WORKER_ENV)
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
            self._catch(signal.SIGINT)
            self.n_workers = len(self._client.scheduler_info().get("workers", {})) or 1
            self._raise_if_interrupted()  # a SIGTERM while the cluster started
        except BaseException:
            self.close(cancel=True)
            raise

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        # A file's bytes (and a glTF's external buffers) go to the workers by scatter, not inside the task's
        # graph: there they would pass through the scheduler, and dask warns of a "large graph" (under -q too).
        shipped = list(args)
        big = [i for i, a in enumerate(shipped) if isinstance(a, (bytes, ExternalFiles))]
        if big:
            for i, fut in zip(big, self._client.scatter([shipped[i] for i in big], hash=False), strict=True):
                shipped[i] = fut
        return self._client.submit(fn, *shipped, pure=False)

    def wait_first(self, futures: list[Any]) -> Iterable[Any]:
        from distributed import wait as dwait

        while True:
            self._raise_if_interrupted()
            try:
                return dwait(futures, timeout=CTRL_C_POLL_S, return_when="FIRST_COMPLETED").done
            except (TimeoutError, asyncio.TimeoutError):  # the same class from Python 3.11
                continue

    def result(self, f: Any) -> Any:
        return f.result()

    def close(self, cancel: bool) -> None:
        """Close the client (its tasks are forgotten: queued ones never run), then the ``LocalCluster`` (with
        ``cancel``, its workers are stopped mid-file first), then remove :attr:`work_root`; each step runs even if
        one before it fails."""
        with contextlib.ExitStack() as steps:  # callbacks run last-in first-out
            steps.callback(self._release)
            if self.work_root is not None:
                steps.callback(_remove_dir, self.work_root)
            if self._cluster is not None:
                steps.callback(self._cluster.close)
                if cancel:
                    steps.callback(self._stop_workers)
            if self._client is not None:
                steps.callback(self._client.close)

    def _stop_workers(self) -> None:
        """Stop the ``LocalCluster``'s workers now: each gets :data:`DASK_STOP_TIMEOUT_S` to stop, then is
        terminated (a closing cluster would wait seconds for the file each one is working on)."""
        nannies = list(self._cluster.workers.values())

        async def stop() -> None:
            await asyncio.gather(*(n.close(timeout=DASK_STOP_TIMEOUT_S) for n in nannies))

        self._cluster.sync(stop)


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
            # The input and the external buffers it read (a .gltf's .bin) are never replaced.
            with atomic_write(job.dst, mode="wb", inputs=[job.src, *res.get("sources", ())]) as f:
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
    ui.note(f"kinema batch: {printable(job.name)}: {_without_name(error, job.name)}")


def _without_name(error: str, name: str) -> str:
    """``error`` without the input's name where it starts with it (the note names it already):
    ``x.bvh: 'x.bvh' is a FIFO; ...`` is noted as ``kinema batch: x.bvh: is a FIFO; ...``."""
    shown = printable(name)
    for prefix in (f"{shown}: ", f"{short_repr(name, PATH_CHARS)} "):
        if error.startswith(prefix):
            error = error[len(prefix):]
    return error


def _check_options(command: str, extra: list[str], to: str | None) -> None:
    """Validate the command's options once, before any work (one-line error on a bad one).

    ``convert --mesh`` with ``--to bvh`` is refused: no output could take a mesh.  Without ``--to`` each output
    has its input's format, and ``--mesh`` applies to the glTF ones (a folder of BVH files alone is not refused:
    whether a command line is valid does not depend on what a folder holds).
    """
    for bad in ("-o", "--output", "--sample", "--force", "--json"):
        if any(x == bad or x.startswith(bad + "=") for x in extra):
            raise UsageError(f"batch sets {bad} itself; remove it from the {command} options")
    opts = build_parser().parse_args(command_argv(command, "input.bvh", "output.bvh", extra))
    if to is not None and FORMATS["." + to] == "bvh" and getattr(opts, "mesh", None) is not None:
        raise UsageError("--mesh applies to glTF output (.gltf, .glb); --to bvh writes BVH")


def _describe(command: str, res: dict[str, Any]) -> tuple[str, str]:
    """``(frames, result)`` columns of the summary for one finished file (the same figures as the command's)."""
    m = res.get("metrics", {})
    frames = str(m.get("frames", ""))
    u = m.get("units", "")
    miss = (f"missed by {m['error_max_units']:.4g} {u} (tolerance {m['tolerance_units']:.3g} {u})"
            if m.get("status") == "missed" else "")
    if command == "footlock":
        s0, s1 = m["skate_before_units_per_s"], m["skate_after_units_per_s"]
        red = f" ({-m['skate_reduction_percent']:+.1f}%)" if s0 > 0 else ""
        return frames, "; ".join(x for x in (miss, f"skate {s0:.3g} -> {s1:.3g} {u}/s{red}") if x)
    if command == "reach":
        return frames, miss or f"error {m['error_max_units']:.3g} {u}"
    return frames, f"{m.get('joints', '')} joints"


def run_batch(args: argparse.Namespace, extra: list[str], ui: UI) -> int:
    """Run ``args.command`` over the folder; returns 0 (all ok or skipped), 3 (some missed) or 1 (some failed)."""
    command = args.command
    in_dir, out_dir = args.input_dir, args.output
    if not os.path.isdir(in_dir):
        if not os.path.exists(in_dir):  # a dangling symlink included
            raise CliError(f"{in_dir}: no such folder")
        mode = os.stat(in_dir).st_mode
        what = "a file" if stat.S_ISREG(mode) else file_kind(mode)  # "a FIFO", ...
        raise CliError(f"{in_dir}: is {what}, not a folder (batch runs over a folder's files; "
                       f"for one file: kinema {command} FILE -o OUT)")
    if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        raise CliError(f"{out_dir}: exists and is not a folder")
    if os.path.isdir(out_dir) and same_file(in_dir, out_dir):
        raise CliError("the output folder is the input folder: outputs would replace their inputs")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be >= 1, got {args.workers}")
    to = args.to.lstrip(".").lower() if args.to else None
    if to is not None and "." + to not in FORMATS:
        raise UsageError(f"--to must be bvh, gltf or glb, got {args.to!r}")
    _check_options(command, extra, to)
    patterns = args.pattern or ["*.bvh", "*.gltf", "*.glb"]
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
            dask = _Dask(args.dask, args.workers, float(args.dask_timeout), len(todo)) if args.dask else None
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
             title=printable(f"kinema batch {command}: {in_dir} -> {out_dir}"), align="llrlr")
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
    # that were in flight when the pool was stopped.  A LocalCluster has its
    # own, which it removes when it closes (a remote cluster has none).
    own_root = dask is None
    work_root = make_work_root() if dask is None else dask.work_root
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
                    external: ExternalFiles | None = None
                    path: str | None = os.path.abspath(job.src)
                    if engine.ships_bytes:
                        try:  # regular files only, as the loaders read them (a FIFO would hang, /dev/zero never ends)
                            data = read_regular(job.src)
                        except (OSError, KinemaError) as e:
                            # worded as the local pool's worker words it (load_motion): "NAME: no such file"
                            error = (f"{job.name}: no such file" if isinstance(e, FileNotFoundError)
                                     else one_line(e).replace(job.src, job.name))
                            finish(job, {"ok": False, "error": error, "seconds": 0.0})
                            continue
                        if format_of(job.src) == "gltf":  # its external buffers go with it, read (once) here
                            found = read_external(os.path.abspath(job.src), data)
                            external = found if found.files or found.refused else None
                        path = None
                    pending[engine.submit(process_file, command, extra, job.name, data, ext, path,
                                          work_root, external)] = job

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
            if isinstance(engine, _Interruptible):
                # A signal to the whole process group stops the workers too, and their end can surface here
                # first as the engine's own error (Dask: "Futures cancelled", a closed connection): the signal
                # is what happened (exit 128 + signum, not a Dask message with status 1).
                engine._raise_if_interrupted()
        raise
    finally:
        if own_root and work_root is not None:
            _remove_dir(work_root)
    engine.close(cancel=False)
    return str(engine.name)
