"""Dispatch and error handling of the ``kinema`` command (the parser is in :mod:`._parser`)."""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from . import _commands as cmd
from ._files import CliError, Interrupted, UsageError
from ._parser import EXIT_FAILED, EXIT_OK, EXIT_USAGE, PROG, build_parser, join_negative_values
from ._ui import UI, one_line

__all__ = ["main"]


def _dispatch(args: argparse.Namespace, extra: list[str], ui: UI) -> int:
    from . import _batch, _bench

    name = args.cmd
    if name != "batch" and extra:
        raise UsageError(f"unrecognized arguments: {' '.join(extra)}")
    if name == "info":
        return cmd.run_info(args, ui)
    if name == "convert":
        if args.sample and args.input:
            raise UsageError("give either IN or --sample, not both")
        if not args.sample and not args.input:
            raise UsageError("convert needs IN and OUT (or --sample NAME OUT)")
        return cmd.run_convert(args, ui)
    if name == "footlock":
        return cmd.run_footlock(args, ui)
    if name == "reach":
        return cmd.run_reach(args, ui)
    if name == "batch":
        return _batch.run_batch(args, extra, ui)
    if name == "bench":
        return _bench.run_bench(args, ui)
    if name == "sample":
        return cmd.run_sample(args, ui)
    if name == "warmup":
        return cmd.run_warmup(args, ui)
    if name == "view":
        from ..viewer._cli import run_view

        return run_view(args)
    if name == "demo":
        from ._demo import run_demo

        return run_demo(args, ui)
    raise CliError(f"unknown command {name!r}")


def _raise_interrupted(signum: int, frame: Any) -> None:
    raise Interrupted(signum)


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises :class:`Interrupted` (as Ctrl-C raises KeyboardInterrupt), so cleanup runs."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        yield
        return
    old = signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe (or socket) whose reader has closed it (``kinema info F | head -1``).

    A BrokenPipeError from elsewhere (a worker's pipe) is a real failure; poll tells them apart (POLLERR on a
    pipe with no reader).  Where poll cannot say, a BrokenPipeError is taken to be stdout's.
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # no real stdout (captured in tests): not this
        return False
    if not hasattr(select, "poll"):
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except OSError:
        return True


def _quiet_stdout() -> None:
    """Point stdout at the null device, so that the interpreter's last flush at exit cannot fail again
    ("Exception ignored ... BrokenPipeError"), as the Python docs on SIGPIPE recommend."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass


def _compile_hint(ui: UI) -> None:
    """A command that ends while a second process still compiles the kernels it ran as plain Python
    (:mod:`kinema._kernels._tier`) says so on stderr: that process stops with the command, so the next run is
    as slow unless the kernels are compiled once."""
    from .._precompile import running

    if running("in_use") and not ui.quiet:
        print(f"{PROG}: this run's kernels ran as plain Python (not compiled yet); `{PROG} warmup` compiles them "
              "once (a minute or two), and later runs are faster", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kinema`` console script; returns the exit status."""
    started = time.perf_counter()
    argv = join_negative_values(list(sys.argv[1:] if argv is None else argv))
    debug = "--debug" in argv or bool(os.environ.get("KINEMA_DEBUG"))
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
    except SystemExit as e:  # --help, --version, or a usage error already printed
        return int(e.code) if isinstance(e.code, int) else EXIT_USAGE
    if args.cmd is None:
        parser.print_help()
        return EXIT_USAGE
    args.started = started  # the commands' "seconds" is the wall time from here
    ui = UI(quiet=getattr(args, "quiet", False), progress=getattr(args, "progress", None))
    try:
        with _sigterm_interrupts():
            code = _dispatch(args, extra, ui)
            _compile_hint(ui)
            sys.stdout.flush()  # here, not at exit: a closed stdout is then handled below
            return code
    except BrokenPipeError:
        if not _stdout_reader_gone():
            if debug:
                raise
            sys.stderr.write(f"{PROG}: error: Broken pipe\n")
            return EXIT_FAILED
        # The reader of stdout stopped early (``kinema info F | head -1``): kinema ends quietly with status 0,
        # as a reader that has what it wanted is no failure (``set -o pipefail`` scripts stay green).  Tools
        # killed by SIGPIPE exit 141 instead; kinema prefers 0 because Python ignores SIGPIPE anyway and
        # every result it was asked for is written before anything else, so nothing is left half-done.
        _quiet_stdout()
        return EXIT_OK
    except KeyboardInterrupt as e:
        if debug:
            raise
        signum = e.signum if isinstance(e, Interrupted) else signal.SIGINT
        sys.stderr.write(f"{PROG}: interrupted (no partial output was left)\n")
        return 128 + int(signum)
    except SystemExit as e:  # argparse inside a command (batch option check)
        return int(e.code) if isinstance(e.code, int) else EXIT_USAGE
    except UsageError as e:
        sys.stderr.write(f"{PROG}: error: {one_line(e)}\n")
        return EXIT_USAGE
    except Exception as e:
        if debug:
            raise
        sys.stderr.write(f"{PROG}: error: {one_line(e)}\n")
        return EXIT_FAILED
