"""Run test code in several threads at once, switching between them as often as Python allows."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any


def run_at_once(work: Callable[..., Any], args: list[tuple[Any, ...]]) -> None:
    """Start ``work(*a)`` for each ``a`` in ``args`` in its own thread and wait for all of them.

    The interpreter's thread switch interval is set to 1 us meanwhile, so
    code that races (kernels release the GIL) interleaves as much as it can.
    """
    threads = [threading.Thread(target=work, args=a) for a in args]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(interval)
