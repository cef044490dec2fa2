"""The ``view`` subcommand: ``kinema view [FILE] [--host 127.0.0.1] [--port 8080] [--root DIR] [--out DIR]``.

The CLI registers it with :func:`add_view_arguments` (or
:func:`add_view_parser`) and runs :func:`run_view`; ``python -m
kinema.viewer`` runs the same command through :func:`main`.

A FILE that cannot be read is an error before anything listens: the
``kinema`` command prints it as one line and exits 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import KinemaError
from ._serve import DEFAULT_HOST, DEFAULT_PORT, MAX_PORT, check_port

__all__ = ["add_view_arguments", "add_view_parser", "run_view", "main", "port_number", "HELP", "MAX_PORT"]

HELP = "pose a rig live in the browser (needs the 'viewer' extra)"


def port_number(text: str) -> int:
    """``--port``'s type: an integer in 0..65535 (:func:`~kinema.viewer._serve.check_port`; anything else is a
    usage error, not a server thread's OverflowError that leaves the command hanging)."""
    try:
        return check_port(int(text))
    except (ValueError, KinemaError):
        raise argparse.ArgumentTypeError(f"invalid port {text!r}: expected an integer in 0..{MAX_PORT} "
                                         "(0: any free port)") from None


def add_view_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``[FILE] [--host] [--port] [--root] [--out]`` to a ``view`` parser (the CLI calls this on its own
    subparser)."""
    p.add_argument("file", nargs="?", default=None,
                   help="BVH, glTF or GLB file (default: the bundled sample humanoid)")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"interface to listen on (default {DEFAULT_HOST}; any other lets everyone on the "
                        "network drive the page, and prints a warning)")
    p.add_argument("--port", type=port_number, default=DEFAULT_PORT,
                   help=f"TCP port, 0..{MAX_PORT} (default {DEFAULT_PORT}; 0: any free)")
    p.add_argument("--root", metavar="DIR", default=None,
                   help="the page's Open lists and reads only the .bvh/.gltf/.glb files under DIR "
                        "(default: the current folder)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="the page's export writes only into DIR (default: the current folder)")


def add_view_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``view`` on an argparse ``subparsers`` object; sets ``func=run_view``."""
    p: argparse.ArgumentParser = subparsers.add_parser("view", help=HELP, description=HELP)
    add_view_arguments(p)
    p.set_defaults(func=run_view)
    return p


def run_view(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C; returns the exit status (2 when viser is not installed).

    An unreadable FILE, or a ``--root`` / ``--out`` that is not a folder,
    raises (the loader's error, :class:`kinema.viewer.ViewerPathError`)
    before the server starts; the ``kinema`` command turns it into one line
    and exit status 1.
    """
    try:
        import viser  # noqa: F401
    except ImportError:
        print("kinema view needs the viewer extra: pip install 'kinema[viewer]'", file=sys.stderr)
        return 2
    from ._serve import serve

    serve(args.file, host=args.host, port=args.port, root=getattr(args, "root", None),
          export_dir=getattr(args, "out", None), block=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kinema.viewer ARGS``: the same as ``kinema view ARGS`` (its errors and exit statuses)."""
    from ..cli import main as kinema_main

    return kinema_main(["view", *(sys.argv[1:] if argv is None else argv)])
