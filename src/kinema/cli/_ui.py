"""Terminal output for the command line: plain text, with rich progress when it is there.

``rich`` is the ``cli`` extra and is imported lazily.  Results go to stdout
as plain text (stable for scripts and tests, and rich tables only when
stdout is a terminal); spinners and progress bars go to stderr and only when
stderr is a terminal (``--no-progress`` turns them off).  ``--progress`` shows
them even when stderr is not a terminal: there (a log, a pipe) they are plain
lines, as rich's live display draws nothing on a file and its cursor codes would
litter a log.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = ["UI", "COMPILING", "compile_notice", "one_line", "printable"]

#: What the spinner says while numba compiles a kernel (a real compile, not a cache load).
COMPILING = "compiling kernels (first use, cached afterwards)"

#: Plain progress lines (``--progress`` with stderr not a terminal): at most one "done/total" line per this many
#: seconds (the first and the last are always written), so a long batch does not flood its log.
LINE_INTERVAL_S = 1.0


def printable(text: str, *, keep: str = "") -> str:
    """``text`` safe for a terminal: control and format characters escaped (``\\x1b``, ``\\u200b``).

    Names come from files (a joint named ``ESC[2J`` must not clear the
    user's screen); characters in ``keep`` (e.g. ``"\\n"``) pass as they are.
    """
    if text.isprintable() and not keep:
        return text
    out = []
    for ch in text:
        if ch in keep or ch == " " or not unicodedata.category(ch).startswith(("C", "Z")):
            out.append(ch)
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)


def one_line(e: BaseException) -> str:
    """An exception as one printable line: its message (naming the file of an OSError), else its type."""
    if isinstance(e, OSError) and e.strerror:
        where = f"{e.filename}: " if e.filename else ""
        text = f"{where}{e.strerror}"
    else:
        text = str(e) or type(e).__name__
    if isinstance(e, KeyError) and text.startswith(("'", '"')):
        text = f"missing key {text}"
    return printable(" ".join(text.split()))


def _rich_available() -> bool:
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


class _CompileDepth:
    """numba ``"numba:compile"`` events -> ``on_change(True)`` at the first start, ``(False)`` at the last end.

    numba fires the event only for a real compilation (a kernel loaded from
    its on-disk cache fires nothing), so what the caller shows is true.
    Nested compiles (a kernel compiling the kernels it calls) count once.
    """

    def __init__(self, on_change: Callable[[bool], None]) -> None:
        self._on_change = on_change
        self._depth = 0
        self._lock = threading.Lock()

    def change(self, start: bool) -> None:
        with self._lock:
            if not start and self._depth == 0:
                # the end of a compile that started before the listener was registered (another thread's):
                # "done" without "compiling" before it would be false
                return
            self._depth = self._depth + 1 if start else self._depth - 1
            depth = self._depth
        if depth == (1 if start else 0):
            self._on_change(depth > 0)


@contextlib.contextmanager
def compile_notice(on_change: Callable[[bool], None]) -> Iterator[None]:
    """Within the block, ``on_change(True)`` when numba starts compiling and ``(False)`` when it is done."""
    from numba.core import event as ev  # here, not at import: ``kinema --help`` needs no numba

    from .._precompile import WAIT_EVENT

    depth = _CompileDepth(on_change)

    class Listener(ev.Listener):  # type: ignore[misc]
        def on_start(self, event: Any) -> None:
            depth.change(True)

        def on_end(self, event: Any) -> None:
            depth.change(False)

    listener = Listener()
    # kinema's own wait for a second process compiling kernels (kinema._precompile) is compiling too
    kinds = ("numba:compile", WAIT_EVENT)
    for kind in kinds:
        ev.register(kind, listener)
    try:
        yield
    finally:
        for kind in kinds:
            ev.unregister(kind, listener)


class _NullProgress:
    """Stand-in for a rich progress bar when there is no terminal (or no rich)."""

    def advance(self, n: int = 1) -> None:
        pass

    def describe(self, text: str) -> None:
        pass


class _Lines:
    """Progress as plain lines on stderr, in place of rich's live display (which draws nothing when stderr is not a
    terminal): the description each time it changes, ``done/total`` at most every :data:`LINE_INTERVAL_S`
    seconds (the first and the last always), and a spinner's end with its time.  The same calls as rich's
    ``Progress`` that :class:`_RichProgress` makes (``update``, ``advance``)."""

    def __init__(self, text: str, total: int | None) -> None:
        self._text = text
        self._total = total
        self._done = 0
        self._started = time.perf_counter()
        self._last_count = -float("inf")  # when the last done/total line was written (perf_counter)
        self._lock = threading.Lock()  # numba's compile events may come from another thread
        self._write(self._line())

    @staticmethod
    def _write(line: str) -> None:
        sys.stderr.write(f"kinema: {line}\n")
        sys.stderr.flush()

    def _line(self) -> str:
        if self._total is None:  # a spinner: its description only
            return self._text
        self._last_count = time.perf_counter()
        return f"{self._text}: {self._done}/{self._total}"

    def update(self, task: Any, *, description: str) -> None:
        with self._lock:
            if description != self._text:
                self._text = description
                self._write(self._line())

    def advance(self, task: Any, n: int = 1) -> None:
        with self._lock:
            self._done += n
            last = self._total is not None and self._done >= self._total
            if last or time.perf_counter() - self._last_count >= LINE_INTERVAL_S:
                self._write(self._line())

    def finish(self) -> None:
        """The spinner's last line (a progress bar's last line is its ``total/total``)."""
        if self._total is None:
            self._write(f"done in {time.perf_counter() - self._started:.2f} s")


class _RichProgress:
    """A spinner or progress bar: rich's ``Progress`` on a terminal, :class:`_Lines` elsewhere."""

    def __init__(self, progress: Any, task: Any, text: str) -> None:
        self._progress = progress
        self._task = task
        self._text = text
        self._compiling = False

    def advance(self, n: int = 1) -> None:
        self._progress.advance(self._task, n)

    def describe(self, text: str) -> None:
        self._text = printable(text)
        self._show()

    def compiling(self, active: bool) -> None:
        """numba started (True) or finished (False) compiling: say so next to the description."""
        self._compiling = active
        self._show()

    @property
    def shown(self) -> str:
        """The text the spinner shows now."""
        return f"{self._text}: {COMPILING}" if self._compiling and self._text else (
            COMPILING if self._compiling else self._text)

    def _show(self) -> None:
        self._progress.update(self._task, description=self.shown)


class UI:
    """Where the command line writes: results (stdout), notes and progress (stderr)."""

    def __init__(self, *, quiet: bool = False, progress: bool | None = None) -> None:
        self.quiet = quiet
        live = sys.stderr.isatty() and _rich_available()
        #: Whether spinners and bars are shown: by default on a terminal with rich; ``progress`` True or False
        #: (``--progress``, ``--no-progress``) decides instead.
        self.show_progress = live if progress is None else bool(progress)
        #: Shown as rich's live display (a terminal with rich), else as plain lines (:class:`_Lines`).
        self._live = live
        self._err_console: Any = None

    # ------------------------------------------------------------- results
    def print(self, text: str = "") -> None:
        if not self.quiet:
            print(printable(text, keep="\n\t"), flush=True)

    def note(self, text: str) -> None:
        """A remark on stderr (warnings, skipped work); shown even with --quiet."""
        print(printable(text, keep="\n\t"), file=sys.stderr, flush=True)

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
                t.add_row(*(printable(str(c)) for c in r))
            Console().print(t)
            return
        rows = [[printable(str(c)) for c in r] for r in rows]
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
        """A spinner with a changing description for one long step (load, solve, save).

        While numba compiles a kernel (first use; cached afterwards) the
        spinner says :data:`COMPILING`, then goes back to its description.
        """
        if not self.show_progress:
            yield _NullProgress()
            return
        if not self._live:
            yield from self._lines(text, None)
            return
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                      console=self._console(), transient=True) as p:
            task = p.add_task(printable(text), total=None)
            bar = _RichProgress(p, task, printable(text))
            with compile_notice(bar.compiling):
                yield bar

    @contextlib.contextmanager
    def progress(self, total: int, text: str) -> Iterator[_NullProgress | _RichProgress]:
        """A progress bar over ``total`` items."""
        if not self.show_progress:
            yield _NullProgress()
            return
        if not self._live:
            yield from self._lines(text, total)
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      console=self._console(), transient=True) as p:
            task = p.add_task(printable(text), total=total)
            bar = _RichProgress(p, task, printable(text))
            with compile_notice(bar.compiling):
                yield bar

    @staticmethod
    def _lines(text: str, total: int | None) -> Iterator[_RichProgress]:
        """The body of :meth:`status` (``total`` None) and :meth:`progress` as plain lines."""
        lines = _Lines(printable(text), total)
        bar = _RichProgress(lines, None, printable(text))
        with compile_notice(bar.compiling):
            yield bar
        lines.finish()  # not after an error: its message follows instead
