"""``python -m kinema.cli``: the same as the ``kinema`` command."""

from __future__ import annotations

from . import main

raise SystemExit(main())
