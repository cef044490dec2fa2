"""The ``kinema`` command line: mocap clean-up with IK, file conversion, batch runs.

``kinema --help`` lists the commands (``info``, ``convert``, ``footlock``,
``reach``, ``batch``, ``bench``, ``sample``).  The commands are thin layers
over :mod:`kinema.mocap` and :mod:`kinema.io`; :func:`main` is the console
script's entry point (``kinema = "kinema.cli:main"``).

The command's modules (numpy, kinema.io, ...) are imported inside :func:`main`, not when this package is
imported, so that a Ctrl-C while they load is "kinema: interrupted" (status 130) rather than a traceback.
(The ``kinema`` package itself is imported before any of this runs: a Ctrl-C in its first ~0.3 s still ends
in Python's own traceback.)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

__all__ = ["main"]

#: 128 + SIGINT, the status of a command stopped by Ctrl-C.
_EXIT_SIGINT = 130  # EXIT_INTERRUPTED (._status), kept here: nothing to import


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kinema`` console script; returns the exit status."""
    try:
        from ._app import main as app_main

        return app_main(argv)  # handles a Ctrl-C during the command itself (its message says more)
    except KeyboardInterrupt:  # while importing, or parsing the command line
        if "--debug" in (sys.argv[1:] if argv is None else argv) or os.environ.get("KINEMA_DEBUG"):
            raise
        sys.stderr.write("kinema: interrupted\n")
        return _EXIT_SIGINT
