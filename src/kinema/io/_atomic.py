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
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Iterable, Iterator
from typing import IO, Any

__all__ = ["atomic_write", "same_file"]

#: Attempts at a fresh temporary name before giving up (names are 64 random bits,
#: so a second attempt only happens when a stale file happens to collide).
_TEMP_NAME_TRIES = 16

#: Permission bits of a newly created destination, before the process umask
#: (what ``open(path, "w")`` would give).
_NEW_FILE_MODE = 0o666

PathLike = str | os.PathLike[str]


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


def _open_temp(folder: str, name: str) -> tuple[int, str]:
    """Create ``folder/.name.<random>.tmp`` exclusively; returns ``(fd, path)``."""
    for _ in range(_TEMP_NAME_TRIES):
        tmp = os.path.join(folder, f".{name}.{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), _NEW_FILE_MODE)
        except FileExistsError:  # a stale temp file with the same random name: draw again
            continue
        return fd, tmp
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
    final :func:`os.replace` is atomic).  It is flushed and fsync-ed before
    the rename, and removed on any exception (``KeyboardInterrupt`` too),
    which is then re-raised; an ``OSError`` that names no file (``ENOSPC``
    from a write or ``fsync``) is re-raised as an ``OSError`` of the same
    ``errno`` naming ``path``.  A symlink at ``path`` is followed: its target is
    replaced and the link kept.  An existing destination keeps its permission
    bits; a new one gets ``0o666`` minus the umask, like :func:`open`.
    A missing destination folder raises :class:`FileNotFoundError`.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write mode must be 'w' or 'wb', got {mode!r}")
    dest = os.path.realpath(os.fspath(path))
    for src in inputs:
        if same_file(dest, src):
            raise FileExistsError(errno.EEXIST, "refusing to overwrite an input file", os.fspath(path))
    exists = os.path.exists(dest)
    if exists and not overwrite:
        raise FileExistsError(errno.EEXIST, "file exists (overwrite=False)", os.fspath(path))
    if os.path.isdir(dest):
        raise IsADirectoryError(errno.EISDIR, "destination is a folder", os.fspath(path))
    folder, name = os.path.split(dest)
    fd, tmp = _open_temp(folder, name)
    owned = False  # True once a file object owns (and will close) fd
    try:
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
        if not owned:  # fdopen itself failed: the descriptor is still ours to close
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None and exc.errno is not None:
            # A write or fsync error (a full disk) names no file: name the destination.
            raise OSError(exc.errno, exc.strerror or str(exc), os.fspath(path)) from exc
        raise
    _fsync_dir(folder)

