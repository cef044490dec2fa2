"""Where the viewer may read and write: one root folder for Open, one output folder for export.

The page is driven by whoever can reach the server, so its file actions are
confined (pure functions over the file system, no viser):

* **Open** offers the loadable files under ``root`` (:meth:`FileAccess.listing`,
  a bounded walk that never follows a symlink out of the root) and opens only
  a path that resolves to a regular file under it (:meth:`FileAccess.open_path`).
* **Export** writes a plain file name into ``out_dir``
  (:meth:`FileAccess.export_target`): no folders, no ``..``, no absolute
  paths, never through a symlink, and an existing file only with
  ``overwrite=True`` (the page's explicit confirmation).
* **Messages** shown in the page go through :meth:`FileAccess.public`, which
  writes paths under the two folders relative to them and hides every other
  absolute path.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from ..errors import KinemaError
from ._state import BVH_EXTENSIONS, GLTF_EXTENSIONS

__all__ = [
    "LOADABLE_EXTENSIONS",
    "MAX_LISTED_FILES",
    "MAX_WALKED_ENTRIES",
    "MAX_NAME_BYTES",
    "HIDDEN_PATH",
    "ViewerPathError",
    "ExportExistsError",
    "FileAccess",
]

#: File types Open lists and export writes (the loaders' and writers' own).
LOADABLE_EXTENSIONS = BVH_EXTENSIONS + GLTF_EXTENSIONS

#: Most files the Open list shows (a dropdown of thousands is unusable, and the walk must stay short).
MAX_LISTED_FILES = 500

#: Most folder entries one listing looks at (a root like ``/`` or a home folder ends the walk early).
MAX_WALKED_ENTRIES = 20_000

#: Longest export name, in UTF-8 bytes (the usual file-system limit for one name).
MAX_NAME_BYTES = 255

#: What a page message shows instead of a path outside the root and the output folder.
HIDDEN_PATH = "(a path outside the viewer's folders)"

#: Unicode categories refused in an export name: controls (C0, DEL, C1), format characters (the
#: right-to-left override that makes "gpj.bvh" read "hvb.jpg"), line and paragraph separators.
_NOT_IN_NAMES = frozenset({"Cc", "Cf", "Zl", "Zp"})

#: An absolute POSIX path inside a message: a ``/`` not preceded by a word character, dot or another path
#: character, up to where kinema's messages end a file name: ``": "`` or ``":<line>"`` after it, a quote, a
#: bracket or a separator, or the end of the message (trailing spaces left out).  Spaces inside are taken: a
#: file name with spaces is hidden whole ("/x/my secret.bvh: ..." showed "secret.bvh").  A message that goes
#: on after an unquoted path without a colon is hidden to its end: more is hidden, nothing is shown.
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~/\\-])/[^'\"`,;()<>\[\]{}\n]*?(?=\s*(?::(?:\d| |$)|['\"`,;()<>\[\]{}\n]|$))")


class ViewerPathError(KinemaError, ValueError):
    """A file name or path the viewer refuses (outside its folders, not a plain name, not a regular file)."""


class ExportExistsError(ViewerPathError):
    """The export name is an existing file: writing it needs ``overwrite=True`` (the page's confirmation)."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"{name} already exists in the output folder; confirm to overwrite it")


def _inside(folder: str, path: str) -> bool:
    """True when the resolved ``path`` is ``folder`` or below it (both already ``realpath``-ed)."""
    return os.path.commonpath([folder, path]) == folder


def _loadable(name: str) -> bool:
    return name.lower().endswith(LOADABLE_EXTENSIONS)


@dataclass(frozen=True, init=False)
class FileAccess:
    """The viewer's two folders: ``root`` (what Open may read) and ``out_dir`` (where export writes).

    Both are resolved (``os.path.realpath``) on construction and must be
    existing folders (:class:`ViewerPathError` otherwise).
    """

    root: Path
    out_dir: Path

    def __init__(self, root: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> None:
        for what, folder in (("root", root), ("output folder", out_dir)):
            if not os.path.isdir(folder):
                raise ViewerPathError(f"the viewer's {what} {os.fspath(folder)!r} is not a folder")
        object.__setattr__(self, "root", Path(os.path.realpath(root)))
        object.__setattr__(self, "out_dir", Path(os.path.realpath(out_dir)))

    # ---------------------------------------------------------------- open
    def listing(self, *, max_files: int = MAX_LISTED_FILES, max_entries: int = MAX_WALKED_ENTRIES) -> list[str]:
        """The loadable files under the root as sorted ``/``-separated relative paths.

        The walk skips hidden entries (names starting with ``.``), never
        descends into a symlinked folder, lists a symlinked file only when it
        resolves to a regular file under the root, and stops after
        ``max_entries`` folder entries or ``max_files`` files.
        """
        root = str(self.root)
        found: list[str] = []
        seen = 0
        pending = [""]  # folders still to read, relative to the root
        while pending and len(found) < max_files and seen < max_entries:
            rel_dir = pending.pop()
            try:
                with os.scandir(os.path.join(root, rel_dir)) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError:  # unreadable or vanished folder: nothing to list there
                continue
            subdirs = []
            for entry in entries:
                seen += 1
                if seen > max_entries or len(found) >= max_files:
                    break
                if entry.name.startswith("."):
                    continue
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                try:
                    if entry.is_dir(follow_symlinks=False):
                        subdirs.append(rel)
                    elif _loadable(entry.name) and self._regular_under_root(entry.path):
                        found.append(rel)
                except OSError:  # vanished while listing
                    continue
            pending.extend(reversed(subdirs))  # depth first, in name order
        return sorted(found)

    def _regular_under_root(self, path: str) -> bool:
        real = os.path.realpath(path)
        if not _inside(str(self.root), real):
            return False
        try:
            return stat.S_ISREG(os.stat(real).st_mode)
        except OSError:
            return False

    def open_path(self, rel: str) -> Path:
        """The file ``rel`` (a path relative to the root, as :meth:`listing` gives) resolved for reading.

        Refused (:class:`ViewerPathError`, the message naming only ``rel``):
        an absolute path, ``..``, a path that resolves outside the root
        (symlinks included), a missing or non-regular file, an unknown type.
        """
        text = str(rel)
        if not text or "\x00" in text or os.path.isabs(text) or text.startswith(("/", "\\")):
            raise ViewerPathError(f"{text!r} is not a file under the viewer's root")
        parts = text.replace("\\", "/").split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise ViewerPathError(f"{text!r} is not a file under the viewer's root")
        if not _loadable(text):
            raise ViewerPathError(f"{text!r} is not a .bvh, .gltf or .glb file")
        real = os.path.realpath(os.path.join(self.root, *parts))
        if not _inside(str(self.root), real):
            raise ViewerPathError(f"{text!r} is not a file under the viewer's root")
        try:
            mode = os.stat(real).st_mode
        except OSError:
            raise ViewerPathError(f"{text!r}: no such file under the viewer's root") from None
        if not stat.S_ISREG(mode):
            raise ViewerPathError(f"{text!r} is not a regular file")
        return Path(real)

    def relative(self, path: str | os.PathLike[str]) -> str | None:
        """``path`` as the file list names it (``/``-separated, relative to the root), None when it resolves
        outside the root."""
        real = os.path.realpath(path)
        if not _inside(str(self.root), real):
            return None
        return Path(os.path.relpath(real, self.root)).as_posix()

    # ---------------------------------------------------------------- export
    def export_target(self, name: str, *, overwrite: bool = False) -> Path:
        """The output path for the export name ``name``, checked.

        ``name`` must be a plain file name ending in .bvh, .gltf or .glb:
        no folder separators, no ``..``, not hidden, not absolute, at most
        :data:`MAX_NAME_BYTES` bytes (:class:`ViewerPathError`).  An existing
        symlink or non-regular file at the target is always refused; an
        existing regular file raises :class:`ExportExistsError` unless
        ``overwrite``.
        """
        text = str(name).strip()
        if not text:
            raise ViewerPathError("type a file name to export to (e.g. kinema_ik.bvh)")
        seps = {"/", "\\", os.sep} | ({os.altsep} if os.altsep else set())
        if any(s in text for s in seps) or os.path.isabs(text):
            raise ViewerPathError(f"{text!r}: give a plain file name (no folders, '/' or '..'); "
                                  "the viewer writes only into its output folder")
        # (".." is a folder only as the whole name, which starts with "."; "a..b.bvh" is a plain name.)
        if text.startswith(".") or any(unicodedata.category(c) in _NOT_IN_NAMES for c in text):
            raise ViewerPathError(f"{text!r}: a file name may not start with '.' or hold control characters")
        if len(text.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise ViewerPathError(f"the file name is longer than {MAX_NAME_BYTES} bytes")
        if not _loadable(text):
            raise ViewerPathError(f"{text!r}: export to a .bvh, .gltf or .glb file")
        target = self.out_dir / text
        if os.path.islink(target):
            raise ViewerPathError(f"{text!r} is a symbolic link in the output folder; not writing through it")
        if os.path.lexists(target):
            if not target.is_file():
                raise ViewerPathError(f"{text!r} exists in the output folder and is not a regular file")
            if not overwrite:
                raise ExportExistsError(text)
        return target

    # ---------------------------------------------------------------- messages
    def public(self, message: str) -> str:
        """``message`` fit for the page: paths under the root or the output folder relative, others hidden."""
        out = str(message)
        for folder in sorted({str(self.root), str(self.out_dir)}, key=len, reverse=True):
            out = out.replace(folder + os.sep, "")
        return _ABSOLUTE_PATH.sub(HIDDEN_PATH, out)
