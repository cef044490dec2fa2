"""The ``view`` subcommand: ``kinema view [FILE] [--host 127.0.0.1] [--port 8080]``.

The CLI registers it with :func:`add_view_parser`; ``python -m kinema.viewer``
runs it on its own through :func:`main`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from ._serve import DEFAULT_HOST, DEFAULT_PORT

__all__ = ["add_view_arguments", "add_view_parser", "run_view", "main", "HELP"]

HELP = "pose a rig live in the browser (needs the 'viewer' extra)"


def add_view_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``[FILE] [--host] [--port]`` to a ``view`` parser (the CLI calls this on its own subparser)."""
    p.add_argument("file", nargs="?", default=None,
                   help="BVH, glTF or GLB file (default: the bundled sample humanoid)")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"interface to listen on (default {DEFAULT_HOST}; 0.0.0.0 shares on the network)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT}; 0: any free)")


def add_view_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``view`` on an argparse ``subparsers`` object; sets ``func=run_view``."""
    p: argparse.ArgumentParser = subparsers.add_parser("view", help=HELP, description=HELP)
    add_view_arguments(p)
    p.set_defaults(func=run_view)
    return p


def run_view(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C; returns the exit status (2 when viser is not installed)."""
    try:
        import viser  # noqa: F401
    except ImportError:
        print("kinema view needs the viewer extra: pip install 'kinema[viewer]'", file=sys.stderr)
        return 2
    from ._serve import serve

    serve(args.file, host=args.host, port=args.port, block=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kinema view", description=HELP)
    add_view_arguments(p)
    return run_view(p.parse_args(argv))
