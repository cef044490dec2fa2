"""The kinema exception hierarchy.

Every error kinema raises on bad input derives from :class:`KinemaError`, and
each also derives from the matching builtin (``ValueError`` or
``LookupError``) so generic handlers keep working::

    KinemaError
    +-- SkeletonError      (ValueError)  bad skeleton data, names the joint
    +-- BoneNotFoundError  (LookupError) unknown joint name, lists close names
    +-- ShapeError         (ValueError)  says expected versus got
    +-- FileFormatError    (ValueError)  file and line (or JSON path)
    +-- SolverInputError   (ValueError)  NaN/inf targets, degenerate chains
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence

__all__ = [
    "KinemaError",
    "SkeletonError",
    "BoneNotFoundError",
    "ShapeError",
    "BatchIndexError",
    "FileFormatError",
    "SolverInputError",
]


class KinemaError(Exception):
    """Root of every error kinema raises on bad input."""


class SkeletonError(KinemaError, ValueError):
    """Invalid skeleton data (cycle, unknown parent, NaN, zero quaternion, bad scale, ...)."""


class BoneNotFoundError(KinemaError, LookupError):
    """A joint name that is not in the skeleton.

    ``name`` is what was asked for, ``suggestions`` the closest existing names.
    """

    def __init__(self, name: object, names: Sequence[str], message: str | None = None):
        self.name = name
        key = str(name)
        if message is not None:
            self.suggestions: list[str] = []
            super().__init__(message)
            return
        by_lower: dict[str, str] = {}
        for n in names:
            by_lower.setdefault(n.lower(), n)
        # Case-insensitive similarity; a name equal up to case comes first.
        close = [by_lower[c] for c in difflib.get_close_matches(key.lower(), list(by_lower), n=5, cutoff=0.4)]
        if not close:
            low = key.lower()
            close = [n for n in names if low and (low in n.lower() or n.lower() in low)][:5]
        self.suggestions = close
        if close:
            hint = "closest names: " + ", ".join(repr(c) for c in close)
        else:
            shown = ", ".join(repr(n) for n in list(names)[:12])
            more = "" if len(names) <= 12 else f", ... ({len(names)} joints)"
            hint = f"joints are: {shown}{more}"
        super().__init__(f"no joint named {key!r}; {hint}")

    def __str__(self) -> str:  # LookupError would repr() the message
        return str(self.args[0])


class ShapeError(KinemaError, ValueError):
    """An array with the wrong shape; the message says expected versus got."""

    def __init__(self, what: str, expected: str, got: tuple[int, ...] | str):
        self.what = what
        self.expected = expected
        self.got = got
        super().__init__(f"{what}: expected shape {expected}, got {got}")


class BatchIndexError(ShapeError, IndexError):
    """An integer index past the end of a batch dimension (``pose[5]`` on a batch of 3).

    A :class:`ShapeError`, and an :class:`IndexError` as Python's sequence protocol expects: ``for item in
    pose`` and ``list(pose)`` stop at the end of the first batch dimension instead of raising."""


class FileFormatError(KinemaError, ValueError):
    """A file that cannot be read.  ``path`` and ``line`` (1-based, or a JSON path) locate it."""

    def __init__(self, path: str | os.PathLike[str] | None, line: int | str | None, message: str):
        self.path = None if path is None else os.fspath(path)
        self.line = line
        self.reason = message
        where = self.path or "<data>"
        if isinstance(line, int):
            where = f"{where}:{line}"
        elif line is not None:
            where = f"{where} at {line}"
        super().__init__(f"{where}: {message}")


class SolverInputError(KinemaError, ValueError):
    """Input a solver cannot use: NaN or inf targets, degenerate chains, unsupported scale."""
