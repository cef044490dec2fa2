"""The batch worker: one file through one command, in a pool process, on Dask, or in this process.

:func:`process_file` is the only task ``kinema batch`` runs; the local pool
starts its processes with :func:`worker_init`, which makes a worker stop
(and remove its temporary files) when the parent stops it with SIGTERM or
when the parent dies, however it dies (SIGKILL included): the kernel's
parent-death signal on Linux, and on every POSIX system a thread that
watches the parent's process id.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from typing import Any

from ._commands import command_argv, transform
from ._files import format_of, load_motion, save_motion
from ._parser import build_parser
from ._ui import one_line

__all__ = ["process_file", "worker_init", "stop_worker", "PARENT_POLL_S"]

#: Seconds between a pool worker's looks at its parent's process id.
PARENT_POLL_S = 0.2

#: ``prctl`` option that sends the calling process a signal when its parent dies (Linux).
_PR_SET_PDEATHSIG = 1

#: The temporary folder of the file this worker is processing (None between
#: files), and the batch's folder of all worker folders: what a stopped
#: worker removes before it exits.
_WORK_DIR: str | None = None
_WORK_ROOT: str | None = None
_PARENT_PID: int | None = None


def _parent_gone() -> bool:
    return _PARENT_PID is not None and os.getppid() != _PARENT_PID


def _clean_and_exit(status: int) -> None:
    if _WORK_DIR is not None:
        shutil.rmtree(_WORK_DIR, ignore_errors=True)
    if _parent_gone() and _WORK_ROOT is not None:
        # Nobody else will remove the batch's folder (results that were in flight live there too).
        shutil.rmtree(_WORK_ROOT, ignore_errors=True)
    os._exit(status)


def stop_worker(signum: int, frame: Any) -> None:
    """SIGTERM in a batch worker: remove its temporary folder and exit now.

    Workers never write into the output folder (the parent writes every
    output), so ending one mid-file loses nothing; exiting at once (rather
    than raising) keeps the pool from handing it the next file.  When the
    parent is gone (the parent-death signal), the batch's whole temporary
    folder goes too.
    """
    _clean_and_exit(128 + signum)


def _watch_parent() -> None:
    while not _parent_gone():
        time.sleep(PARENT_POLL_S)
    _clean_and_exit(128 + signal.SIGTERM)


def _set_parent_death_signal(signum: int) -> None:
    """Linux: have the kernel send ``signum`` when the parent dies (best effort elsewhere: nothing)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the watching thread still ends the worker
        pass


def worker_init(parent_pid: int, work_root: str | None) -> None:
    """Pool worker start-up: Ctrl-C is the parent's; SIGTERM or the parent's death cleans up and exits."""
    global _PARENT_PID, _WORK_ROOT
    _PARENT_PID, _WORK_ROOT = parent_pid, work_root
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, stop_worker)
    _set_parent_death_signal(signal.SIGTERM)
    if _parent_gone():  # died before the death signal was armed
        _clean_and_exit(128 + signal.SIGTERM)
    threading.Thread(target=_watch_parent, name="kinema-watch-parent", daemon=True).start()


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
        return {"ok": False, "error": one_line(e).replace(src, name), "seconds": time.perf_counter() - t0}
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
        _WORK_DIR = None
