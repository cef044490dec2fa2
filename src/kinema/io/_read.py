"""Reading input files safely: regular files only, never more than asked for.

Every loader reads through :func:`read_regular`: the path is ``stat``-ed first
and anything that is not a regular file (a FIFO, a device, a socket, a folder)
is refused before it is opened, so a FIFO can never block a load and
``/dev/zero`` can never be read until memory runs out.  The file is then
opened non-blocking and checked again on the open descriptor (the path could
have been swapped between the two calls).  With ``size`` exactly that many
bytes are read, after checking that the file holds them.
"""

from __future__ import annotations

import os
import stat

from ..errors import FileFormatError

__all__ = ["read_regular", "file_kind"]

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)


def file_kind(mode: int) -> str:
    """What a non-regular ``st_mode`` is, in words (``"a FIFO"``, ``"a folder"``, ...)."""
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_regular(path: str, *, report_path: str | None = None, where: str | int | None = None,
                 size: int | None = None) -> bytes:
    """The bytes of the regular file ``path``: all of it, or exactly its first ``size`` bytes.

    Raises :class:`kinema.FileFormatError` (``report_path``, default ``path``,
    at ``where``) when ``path`` is not a regular file or holds fewer than
    ``size`` bytes, both found before reading anything.  ``OSError`` (a
    missing file, no permission) is raised as is.
    """
    report = path if report_path is None else report_path
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise FileFormatError(report, where, f"{path!r} is {file_kind(st.st_mode)}; only regular files are read")
    if size is not None and st.st_size < size:
        raise FileFormatError(report, where, f"{path!r} has {st.st_size} bytes, fewer than the {size} needed")
    fd = os.open(path, _OPEN_FLAGS)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):  # swapped after the stat above
            raise FileFormatError(report, where, f"{path!r} is {file_kind(st.st_mode)}; only regular files are read")
        data = f.read() if size is None else f.read(size)
    if size is not None and len(data) < size:  # shrank while being read
        raise FileFormatError(report, where, f"{path!r} has {len(data)} bytes, fewer than the {size} needed")
    return data
