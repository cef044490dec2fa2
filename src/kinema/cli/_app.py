"""Dispatch and error handling of the ``kinema`` command (the parser is in :mod:`._parser`)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from . import _commands as cmd
from ._files import CliError, Interrupted, UsageError
from ._parser import EXIT_FAILED, EXIT_USAGE, PROG, build_parser, join_negative_values
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
            return _dispatch(args, extra, ui)
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
