"""``python -m kinema``: the same as the ``kinema`` command (and ``python -m kinema.cli``)."""

from __future__ import annotations

from .cli import main

raise SystemExit(main())
