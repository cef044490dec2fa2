"""Terminal output for the command line: plain text, with rich progress when it is there.

``rich`` is the ``cli`` extra and is imported lazily.  Results go to stdout
as plain text (stable for scripts and tests, and rich tables only when
stdout is a terminal); spinners and progress bars go to stderr and only when
stderr is a terminal (``--no-progress`` turns them off, ``--progress`` on).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["UI"]


def _rich_available() -> bool:
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


class _NullProgress:
    """Stand-in for a rich progress bar when there is no terminal (or no rich)."""

    def advance(self, n: int = 1) -> None:
        pass

    def describe(self, text: str) -> None:
        pass


class _RichProgress:
    def __init__(self, progress: Any, task: Any) -> None:
        self._progress = progress
        self._task = task

    def advance(self, n: int = 1) -> None:
        self._progress.advance(self._task, n)

    def describe(self, text: str) -> None:
        self._progress.update(self._task, description=text)


class UI:
    """Where the command line writes: results (stdout), notes and progress (stderr)."""

    def __init__(self, *, quiet: bool = False, progress: bool | None = None) -> None:
        self.quiet = quiet
        auto = sys.stderr.isatty()
        self.show_progress = (auto if progress is None else progress) and _rich_available()
        self._err_console: Any = None

    # ------------------------------------------------------------- results
    def print(self, text: str = "") -> None:
        if not self.quiet:
            print(text, flush=True)

    def note(self, text: str) -> None:
        """A remark on stderr (warnings, skipped work); shown even with --quiet."""
        print(text, file=sys.stderr, flush=True)

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[str]], title: str | None = None,
              align: str | None = None) -> None:
        """Rows as an aligned text table (``align``: one of 'l'/'r' per column, default left)."""
        if self.quiet:
            return
        if sys.stdout.isatty() and _rich_available():
            from rich.console import Console
            from rich.table import Table

            t = Table(title=title)
            for i, h in enumerate(headers):
                t.add_column(h, justify="right" if align and align[i] == "r" else "left")
            for r in rows:
                t.add_row(*r)
            Console().print(t)
            return
        cols = [list(map(str, c)) for c in zip(headers, *rows, strict=False)]
        widths = [max(len(x) for x in c) for c in cols]

        def fmt(cells: Sequence[str]) -> str:
            out = []
            for i, c in enumerate(cells):
                right = bool(align and align[i] == "r")
                out.append(c.rjust(widths[i]) if right else c.ljust(widths[i]))
            return "  ".join(out).rstrip()

        if title:
            print(title)
        print(fmt(headers))
        print(fmt(["-" * w for w in widths]))
        for r in rows:
            print(fmt(r))
        sys.stdout.flush()

    # ------------------------------------------------------------ progress
    def _console(self) -> Any:
        if self._err_console is None:
            from rich.console import Console

            self._err_console = Console(stderr=True)
        return self._err_console

    @contextlib.contextmanager
    def status(self, text: str) -> Iterator[_NullProgress | _RichProgress]:
        """A spinner with a changing description for one long step (load, solve, save)."""
        if not self.show_progress:
            yield _NullProgress()
            return
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                      console=self._console(), transient=True) as p:
            task = p.add_task(text, total=None)
            yield _RichProgress(p, task)

    @contextlib.contextmanager
    def progress(self, total: int, text: str) -> Iterator[_NullProgress | _RichProgress]:
        """A progress bar over ``total`` items."""
        if not self.show_progress:
            yield _NullProgress()
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      console=self._console(), transient=True) as p:
            task = p.add_task(text, total=total)
            yield _RichProgress(p, task)
