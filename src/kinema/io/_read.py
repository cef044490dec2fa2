"""Reading input files safely: regular files only, never more than asked for.

Every loader reads through :func:`read_regular`: the path is ``stat``-ed first
and anything that is not a regular file (a FIFO, a device, a socket, a folder)
is refused before it is opened, so a FIFO can never block a load and
``/dev/zero`` can never be read until memory runs out.  The file is then
opened non-blocking and checked again on the open descriptor (the path could
have been swapped between the two calls).  With ``size`` exactly that many
bytes are read, after checking that the file holds them.

:func:`short_repr` quotes a value from a file in an error message, cut to
:data:`SHOWN_CHARS` characters (a 100,000-character URI or line must not
fill the terminal): every io error message quotes file values through it.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from ..errors import FileFormatError, SolverInputError

__all__ = ["read_regular", "check_path", "file_kind", "short_repr", "fewer_bytes", "SHOWN_CHARS", "PATH_CHARS"]

#: Longest quotation of a value (its ``repr``) in an error message; a longer one is cut here.
SHOWN_CHARS = 60
#: Longest quotation of a file path (macOS's PATH_MAX): real paths are quoted whole (the batch command replaces
#: an input's path by its name in messages); one made of a huge URI is cut.
PATH_CHARS = 1024

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)


def short_repr(value: object, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` for an error message: whole up to ``limit`` characters, else its first ``limit``
    characters and ``... (N characters)`` (N: a string's length; bytes and list, tuple or dict items are
    counted as such; anything else by its ``repr``).  Paths are quoted with ``limit=PATH_CHARS``."""
    text = repr(value)
    if len(text) <= limit:
        return text
    if isinstance(value, (bytes, bytearray)):
        size = f"{len(value):,} bytes"
    elif isinstance(value, (list, tuple, dict)):
        size = f"{len(value):,} items"
    else:
        size = f"{len(value) if isinstance(value, str) else len(text):,} characters"
    return f"{text[:limit]}... ({size})"


def check_path(path: Any, what: str = "path") -> str:
    """``path`` (a ``str`` or an :class:`os.PathLike` giving one) as a ``str``: the one check of every file path a
    reader or writer is given.

    :class:`kinema.SolverInputError` naming ``what`` for anything else (None, an int, a list, bytes: ``os`` would
    raise a bare ``TypeError``) and for a path holding a NUL character (no file system takes one; ``os`` would
    raise a bare ``ValueError``).  Whether the file exists is left to the caller (``OSError``, as documented).
    """
    p = path
    if isinstance(path, os.PathLike):
        try:
            p = os.fspath(path)
        except TypeError:  # its __fspath__ gives neither str nor bytes
            raise SolverInputError(f"{what} must be a str or os.PathLike, got a {type(path).__name__} whose "
                                   "__fspath__ gives no path") from None
    if not isinstance(p, str):  # not a path at all, or an os.PathLike of bytes
        raise SolverInputError(f"{what} must be a str or os.PathLike, got {type(p).__name__}")
    if "\0" in p:
        raise SolverInputError(f"{what} {short_repr(p, PATH_CHARS)} holds a NUL character, which no file path can")
    return p


def fewer_bytes(path: str, have: int, need: int) -> str:
    """The message for a file of ``have`` bytes read for ``need`` (:func:`read_regular`, and glTF buffers read
    elsewhere: :class:`kinema.io.gltf.reader.ExternalFiles`)."""
    return f"{short_repr(path, PATH_CHARS)} has {have} bytes, fewer than the {need} needed"


def file_kind(mode: int) -> str:
    """What a non-regular ``st_mode`` is, in words (``"a FIFO"``, ``"a folder"``, ...)."""
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_regular(path: str, *, report_path: str | None = None, where: str | int | None = None,
                 size: int | None = None, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``path``: all of it, exactly its first ``size`` bytes, or at most its first
    ``limit`` bytes.

    Raises :class:`kinema.FileFormatError` (``report_path``, default ``path``,
    at ``where``) when ``path`` is not a regular file or holds fewer than
    ``size`` bytes, both found before reading anything.  ``OSError`` (a
    missing file, no permission) is raised as is.
    """
    report = path if report_path is None else report_path
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise FileFormatError(report, where, _not_regular(path, st.st_mode))
    if size is not None and st.st_size < size:
        raise FileFormatError(report, where, fewer_bytes(path, st.st_size, size))
    most = size if size is not None else limit
    fd = os.open(path, _OPEN_FLAGS)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):  # swapped after the stat above
            raise FileFormatError(report, where, _not_regular(path, st.st_mode))
        data = f.read() if most is None else f.read(most)
    if size is not None and len(data) < size:  # shrank while being read
        raise FileFormatError(report, where, fewer_bytes(path, len(data), size))
    return data


def _not_regular(path: str, mode: int) -> str:
    return f"{short_repr(path, PATH_CHARS)} is {file_kind(mode)}; only regular files are read"
