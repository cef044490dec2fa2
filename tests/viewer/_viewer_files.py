"""A helper of the viewer's file-confinement tests (state and browser): what a folder holds."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["tree"]


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every entry under ``folder``, not following symlinks: relative path -> the file's bytes (None: a folder,
    a symlink or a special file).  Two snapshots differ when anything was written, replaced or created."""
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            regular = p.is_file() and not p.is_symlink()
            out[p.relative_to(folder).as_posix()] = p.read_bytes() if regular else None
    return out
