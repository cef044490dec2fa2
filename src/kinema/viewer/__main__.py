"""``python -m kinema.viewer [FILE] [--host H] [--port P] [--root DIR] [--out DIR]`` (the same as ``kinema view``)."""

from __future__ import annotations

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
