"""Atomic file output shared by every kinema writer (BVH, glTF/GLB, the CLI).

Nothing is lost when a write fails: the data goes to a temporary file in the
destination's folder, is flushed and ``fsync``-ed, and only then renamed over
the destination with :func:`os.replace` (atomic on POSIX and Windows when both
names are on one file system, which the shared folder guarantees).  On any
exception, ``KeyboardInterrupt`` included, the temporary file is removed and
the destination is left exactly as it was.

Usage::

    from kinema.io._atomic import atomic_write

    with atomic_write(path, mode="w", inputs=[source_path]) as f:
        f.write(text)

A writer that is handed the path of one of its own inputs refuses (``inputs``):
a converter must never overwrite the file it reads.

A process killed outright (SIGKILL, power loss) cannot remove its temporary
file.  Temporary names carry the writer's process id
(``.NAME.PID-RANDOM.tmp``), and every write removes the temporary files in
its folder whose writer is no longer running (:func:`remove_stale_temps`),
so a leftover lasts only until the next write into that folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from .._validate import check_flag
from ._read import check_path, file_kind

__all__ = ["atomic_write", "same_file", "remove_stale_temps", "is_temp_name", "source_files", "make_work_folder",
           "remove_stale_work_folders", "work_folder"]


def source_files(meta: Any) -> list[str]:
    """The files a skeleton was read from, by its ``meta``: ``meta["source"]`` (the BVH or glTF file) and a glTF's
    external buffer files (``meta["source_files"]``).  A writer's ``inputs``: it never replaces them."""
    files = [meta.get("source"), *meta.get("source_files", ())]
    return [f for f in files if isinstance(f, str)]

#: Attempts at a fresh temporary name before giving up (names are 64 random bits,
#: so a second attempt only happens when a stale file happens to collide).
_TEMP_NAME_TRIES = 16

#: Longest file name in bytes (NAME_MAX of Linux, macOS and Windows' NTFS); a folder may say less.
_NAME_MAX = 255

#: Permission bits of a newly created destination, before the process umask
#: (what ``open(path, "w")`` would give).
_NEW_FILE_MODE = 0o666

PathLike = str | os.PathLike[str]

#: A temporary file of :func:`atomic_write`: ``.NAME.PID-RANDOM.tmp`` (PID: the writer's process id).
_TEMP_NAME = re.compile(r"^\..+\.(?P<pid>[0-9]+)-[0-9a-f]{16}\.tmp$")


def is_temp_name(name: str) -> bool:
    """Whether ``name`` (a bare file name) is one of :func:`atomic_write`'s temporary files."""
    return _TEMP_NAME.match(name) is not None


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists (POSIX: signal 0 checks without sending anything)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def entries_of_dead_processes(folder: PathLike, name: re.Pattern[str]) -> list[os.DirEntry[str]]:
    """``folder``'s entries whose whole name matches ``name`` (with a ``pid`` group) and whose process id is not
    a running process (never this one's).  POSIX only (elsewhere there is no safe way to ask whether a process
    exists): ``[]``; an unreadable folder gives ``[]`` too."""
    if os.name != "posix":
        return []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    dead = []
    for entry in entries:
        m = name.fullmatch(entry.name)
        if m is None:
            continue
        try:
            pid = int(m.group("pid"))
            if pid != os.getpid() and not _running(pid):
                dead.append(entry)
        except OverflowError:  # a pid beyond what the system takes: not a process of ours
            continue
    return dead


def remove_stale_temps(folder: PathLike) -> list[str]:
    """Remove ``folder``'s temporary files left by writers that are no longer running; returns their paths.

    Only regular files named like :func:`atomic_write`'s temporaries whose process id is not a running
    process are removed (a writer that is still at work keeps its file; :func:`entries_of_dead_processes`).
    """
    removed = []
    for entry in entries_of_dead_processes(folder, _TEMP_NAME):
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            os.unlink(entry.path)
        except OSError:  # gone already (another writer cleaned it), or not ours to remove
            continue
        removed.append(entry.path)
    return removed


def _work_folder_name(kind: str) -> re.Pattern[str]:
    """A command's work folder in the system's temporary folder is ``kinema-<kind>-<pid>-<random>``: the process
    id of the command that made it, so that a later one can tell a folder left by one killed outright (SIGKILL,
    a power cut: nothing runs to clean up) from one in use."""
    return re.compile(rf"kinema-{re.escape(kind)}-(?P<pid>[0-9]+)-[^-]+")


def remove_stale_work_folders(kind: str, folder: str | None = None) -> list[str]:
    """Remove the ``kind`` work folders (:func:`make_work_folder`) left in ``folder`` (default: the system's
    temporary folder) by commands that are no longer running; returns their paths.

    Only real folders (not links) of this user named like :func:`_work_folder_name` whose process id is not a
    running process go; a command at work keeps its own.  POSIX only (elsewhere there is no safe way to ask
    whether a process exists): returns ``[]``.
    """
    removed = []
    for entry in entries_of_dead_processes(folder or tempfile.gettempdir(), _work_folder_name(kind)):
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
        except OSError:  # gone already
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed


def make_work_folder(kind: str) -> str:
    """A new ``kinema-<kind>-<pid>-<random>`` folder in the system's temporary folder, after removing those that
    commands killed outright left (:func:`remove_stale_work_folders`).  The caller removes it."""
    remove_stale_work_folders(kind)
    return tempfile.mkdtemp(prefix=f"kinema-{kind}-{os.getpid()}-")


@contextlib.contextmanager
def work_folder(kind: str) -> Iterator[str]:
    """:func:`make_work_folder`, removed with what it holds when the block ends (a kill that skips this leaves
    it to the next command of the kind)."""
    path = make_work_folder(kind)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def same_file(a: PathLike, b: PathLike) -> bool:
    """True when ``a`` and ``b`` name the same file (hard links and symlinks included).

    Uses :func:`os.path.samefile` when both exist, else compares the resolved
    absolute paths (a destination that does not exist yet can still be spelt
    like an input, e.g. through ``..``).
    """
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _name_max(folder: str) -> int:
    """The longest file name (in bytes) ``folder`` takes: its ``PC_NAME_MAX``, else 255 (the common limit)."""
    try:
        n = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):  # not POSIX (no pathconf), or the folder does not say
        return _NAME_MAX
    return n if 0 < n < _NAME_MAX else _NAME_MAX  # -1: no limit stated


def _temp_name(name: str, suffix: str, name_max: int) -> str:
    """``.name<suffix>`` with ``name`` cut (whole characters) so that the result fits ``name_max`` bytes.

    A legal destination name of up to ``name_max`` bytes must stay writable: the temporary name
    adds ``.``, the process id and the random part, so the name part yields.  Uniqueness comes
    from the process id and the random part, not from the name.
    """
    budget = max(name_max - len(os.fsencode("." + suffix)), 1)
    short = name
    while len(short) > 1 and len(os.fsencode(short)) > budget:
        short = short[: min(len(short) - 1, budget)]
    return f".{short}{suffix}"


def _open_temp(folder: str, name: str, claim: Callable[[str], None]) -> int:
    """Create ``folder/.name.<pid>-<random>.tmp`` exclusively (``name`` cut to fit the folder's
    name limit, see :func:`_temp_name`); returns its descriptor.

    ``claim(path)`` is called with each name *before* the file is created, so a
    caller interrupted (Ctrl-C, SIGTERM) right after the creation, before this
    returns, still knows which file to remove.
    """
    name_max = _name_max(folder)
    for _ in range(_TEMP_NAME_TRIES):
        tmp = os.path.join(folder, _temp_name(name, f".{os.getpid()}-{secrets.token_hex(8)}.tmp", name_max))
        claim(tmp)
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), _NEW_FILE_MODE)
        except FileExistsError:  # a stale temp file with the same random name: draw again
            continue
    raise FileExistsError(errno.EEXIST, f"could not create a unique temporary file next to {name!r}", folder)


def _fsync_dir(folder: str) -> None:
    """Make the rename durable (POSIX); folders cannot be opened on Windows, so skip there."""
    if os.name != "posix":
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # e.g. a folder we may write but not read: the rename still happened
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems refuse fsync on folders; the data itself is synced
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_write(
    path: PathLike,
    *,
    mode: str = "wb",
    overwrite: bool = True,
    inputs: Iterable[PathLike] = (),
    encoding: str | None = "utf-8",
    newline: str | None = None,
) -> Iterator[IO[Any]]:
    """Context manager yielding a file object whose contents replace ``path`` on success.

    * ``mode``: ``"wb"`` (bytes, the default) or ``"w"`` (text; ``encoding``
      and ``newline`` as for :func:`open`, UTF-8 by default).
    * ``overwrite``: when False an existing ``path`` raises
      :class:`FileExistsError` before anything is written.
    * ``inputs``: paths the caller reads from; if ``path`` is one of them
      (:func:`same_file`) a :class:`FileExistsError` is raised before anything
      is written, so an input is never overwritten.

    The temporary file lives in ``path``'s folder (same file system, so the
    final :func:`os.replace` is atomic); stale ones of killed writers there
    are removed first (:func:`remove_stale_temps`).  It is flushed and fsync-ed before
    the rename, and removed on any exception (``KeyboardInterrupt`` too),
    which is then re-raised; an ``OSError`` that names no file (``ENOSPC``
    from a write or ``fsync``) or names the temporary file (creating or
    renaming it failed) is re-raised as an ``OSError`` of the same
    ``errno`` naming ``path``.  A symlink at ``path`` is followed: its target is
    replaced and the link kept.  A destination that is not a regular file (a
    device, a FIFO, a socket, behind a symlink or not) raises
    :class:`FileExistsError`: it is never replaced.  An existing destination keeps its permission
    bits; a new one gets ``0o666`` minus the umask, like :func:`open`.
    A missing destination folder raises :class:`FileNotFoundError`.  A ``path`` that is no path (None, an int,
    bytes, a NUL character: :func:`kinema.io._read.check_path`) and an ``overwrite`` that is not True or False
    raise :class:`kinema.SolverInputError`.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write mode must be 'w' or 'wb', got {mode!r}")
    spath = check_path(path)
    overwrite = check_flag(overwrite, "overwrite")  # (truthiness would read "False" as True and overwrite)
    dest = os.path.realpath(spath)
    for src in inputs:
        if same_file(dest, src):
            raise FileExistsError(errno.EEXIST, "refusing to overwrite an input file", spath)
    exists = os.path.exists(dest)
    if exists and not overwrite:
        raise FileExistsError(errno.EEXIST, "file exists (overwrite=False)", spath)
    if os.path.isdir(dest):
        raise IsADirectoryError(errno.EISDIR, "destination is a folder", spath)
    if exists and not stat.S_ISREG(os.stat(dest).st_mode):
        # A device or a FIFO (perhaps behind a symlink: out.bvh -> /dev/null) is never replaced by a file.
        raise FileExistsError(errno.EEXIST, f"destination is {file_kind(os.stat(dest).st_mode)}, not a regular file",
                              spath)
    folder, name = os.path.split(dest)
    remove_stale_temps(folder)
    claimed: list[str] = []  # the temporary name, known before the file exists
    fd = -1
    owned = False  # True once a file object owns (and will close) fd
    try:
        fd = _open_temp(folder, name, claimed.append)
        tmp = claimed[-1]
        if exists:
            with contextlib.suppress(OSError):  # e.g. on a file system without chmod
                os.chmod(tmp, os.stat(dest).st_mode & 0o7777)
        if mode == "wb":
            f: IO[Any] = os.fdopen(fd, "wb")
        else:
            f = os.fdopen(fd, "w", encoding=encoding, newline=newline)
        owned = True
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    except BaseException as exc:
        # Failed or interrupted: the destination is untouched; drop the partial file.
        if not owned and fd >= 0:  # fdopen itself failed: the descriptor is still ours to close
            with contextlib.suppress(OSError):
                os.close(fd)
        if claimed:  # created, or interrupted between creating it and getting its descriptor
            with contextlib.suppress(OSError):
                os.unlink(claimed[-1])
        if isinstance(exc, OSError) and exc.errno is not None and (exc.filename is None or exc.filename in claimed):
            # A write or fsync error (a full disk) names no file, and one from creating or renaming the
            # temporary file names that internal file: name the destination instead.
            raise OSError(exc.errno, exc.strerror or str(exc), spath) from exc
        raise
    _fsync_dir(folder)

