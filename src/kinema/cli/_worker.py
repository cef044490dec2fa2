"""The batch worker: one file through one command, in a pool process, on Dask, or in this process.

:func:`process_file` is the only task ``kinema batch`` runs; the local pool
starts its processes with :func:`worker_init`, which makes a worker stop
(and remove its temporary files) when the parent stops it with SIGTERM or
when the parent dies, however it dies (SIGKILL included): a thread waits on
multiprocessing's parent sentinel (a pipe that reads end-of-file once the
parent process is gone), and a worker that ends by itself because the
pool's pipes closed cleans up on its way out.

(Linux's parent-death signal, ``prctl(PR_SET_PDEATHSIG)``, is not used: it
fires when the *thread* that started the worker ends, which for a killed
parent can come while the parent process still exists, so a worker cannot
tell from it that the batch's folder is now its to remove.)
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import multiprocessing.util
import os
import shutil
import signal
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Any

from ._commands import command_argv, transform
from ._files import format_of, load_motion, save_motion
from ._parser import build_parser
from ._ui import one_line

if TYPE_CHECKING:
    from ..io.gltf.reader import ExternalFiles

__all__ = ["process_file", "worker_init", "stop_worker", "PARENT_POLL_S"]

#: Seconds between a pool worker's looks at its parent's process id (when it has no parent sentinel).
PARENT_POLL_S = 0.2

#: Priority of the exit hook that removes the batch's folder (multiprocessing runs hooks >= 0 at exit).
_EXIT_HOOK_PRIORITY = 100

#: A stopped worker's cleanup retries its ``rmtree`` up to this many times, this far apart: the
#: worker's main thread (or another worker cleaning the same folder) may add an entry while the
#: tree is being removed, and a removal that meets a new entry leaves the folder behind.
CLEANUP_TRIES = 50
CLEANUP_RETRY_S = 0.02

#: The temporary folder of the file this worker is processing (None between
#: files), and the batch's folder of all worker folders: what a stopped
#: worker removes before it exits.
_WORK_DIR: str | None = None
_WORK_ROOT: str | None = None
_PARENT_PID: int | None = None


def _parent_gone() -> bool:
    """True once the process that started this worker has died (re-parented, or its sentinel pipe closed)."""
    if _PARENT_PID is None:
        return False
    if os.getppid() != _PARENT_PID:
        return True
    parent = multiprocessing.parent_process()
    return parent is not None and not parent.is_alive()


def _remove_tree(path: str) -> None:
    for _ in range(CLEANUP_TRIES):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            return
        time.sleep(CLEANUP_RETRY_S)


def _clean_and_exit(status: int) -> None:
    work_dir = _WORK_DIR
    if work_dir is not None:
        _remove_tree(work_dir)
    if _parent_gone() and _WORK_ROOT is not None:
        # Nobody else will remove the batch's folder (results that were in flight live there too).
        _remove_tree(_WORK_ROOT)
    os._exit(status)


def stop_worker(signum: int, frame: Any) -> None:
    """SIGTERM in a batch worker: remove its temporary folder and exit now.

    Workers never write into the output folder (the parent writes every
    output), so ending one mid-file loses nothing; exiting at once (rather
    than raising) keeps the pool from handing it the next file.  When the
    parent is gone, the batch's whole temporary folder goes too.
    """
    _clean_and_exit(128 + signum)


def _watch_parent() -> None:
    parent = multiprocessing.parent_process()
    if parent is not None and parent.sentinel is not None:
        multiprocessing.connection.wait([parent.sentinel])  # returns when the parent is gone
    while not _parent_gone():
        time.sleep(PARENT_POLL_S)
    _clean_and_exit(128 + signal.SIGTERM)


def _on_exit() -> None:
    """A worker ending by itself (the pool's pipes closed because the parent died) still cleans up."""
    if _parent_gone() and _WORK_ROOT is not None:
        _remove_tree(_WORK_ROOT)


def worker_init(parent_pid: int, work_root: str | None) -> None:
    """Pool worker start-up: Ctrl-C is the parent's; SIGTERM or the parent's death cleans up and exits."""
    global _PARENT_PID, _WORK_ROOT
    _PARENT_PID, _WORK_ROOT = parent_pid, work_root
    # One numba thread per worker: the pool is the parallelism (N workers each starting as many numba threads
    # as there are cores oversubscribe the machine, and two workers ran slower than one).  Set before numba is
    # imported in this fresh (spawned) process.
    os.environ["NUMBA_NUM_THREADS"] = "1"
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, stop_worker)
    if _parent_gone():  # died while this worker was starting
        _clean_and_exit(128 + signal.SIGTERM)
    multiprocessing.util.Finalize(None, _on_exit, exitpriority=_EXIT_HOOK_PRIORITY)
    threading.Thread(target=_watch_parent, name="kinema-watch-parent", daemon=True).start()


def process_file(command: str, argv: list[str], name: str, data: bytes | None, out_ext: str,
                 path: str | None = None, work_root: str | None = None,
                 external: ExternalFiles | None = None) -> dict[str, Any]:
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

    The input is processed by the same code as the single-file command: the
    local pool reads it in place (so a FIFO or a device is refused before it
    is opened, and a .gltf finds its external buffers beside it); Dask's bytes
    are written into the temporary folder under the input's own name, and a
    glTF's external buffers come with them (``external``, read beside the
    input by :func:`kinema.io.gltf.reader.read_external`), so both modes give
    the same output and the same errors.  Returns ``{"ok": True, "metrics":
    {...}, "sources": [...], "seconds": s, ...}`` (``sources``: the external
    buffer files read, as resolved where the input is: inputs the output
    must not replace) or ``{"ok": False, "error": "one line", "seconds": s}``.
    """
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
            src = path
        else:
            src = os.path.join(tmp, os.path.basename(name))
            with open(src, "wb") as f:
                f.write(data)
        out = os.path.join(tmp, "out" + out_ext)
        args = build_parser().parse_args(command_argv(command, src, out, argv))
        m = load_motion(src, clip_name=args.clip, fps=getattr(args, "fps", None), even_frames=format_of(out) == "bvh",
                        external=external)
        sk, clip, mesh, metrics = transform(command, m, args)
        save_motion(out, sk, clip, name=m.clip_name, mesh=getattr(args, "mesh", None), inputs=[src],
                    loaded_mesh=mesh, scale=float(getattr(args, "scale", 1.0)))
        res: dict[str, Any] = {"ok": True, "metrics": metrics, "seconds": time.perf_counter() - t0,
                               "sources": list(m.skeleton.meta.get("source_files", ()))}
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
        return {"ok": False, "error": one_line(e).replace(src, name), "seconds": time.perf_counter() - t0}
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
        _WORK_DIR = None
