"""The ``kinema`` command line: mocap clean-up with IK, file conversion, batch runs.

``kinema --help`` lists the commands (``info``, ``convert``, ``footlock``,
``reach``, ``batch``, ``bench``, ``sample``).  The commands are thin layers
over :mod:`kinema.mocap` and :mod:`kinema.io`; :func:`main` is the console
script's entry point (``kinema = "kinema.cli:main"``).
"""

from __future__ import annotations

from ._app import main

__all__ = ["main"]
