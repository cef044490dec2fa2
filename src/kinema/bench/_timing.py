"""Timing on a noisy machine: medians with their spread, and a busy process to run beside.

No figure here is ever asserted; the suite prints them and writes them to JSON.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["Spread", "measure", "per_call", "busy_process", "BUSY_SETTLE_S"]

#: Seconds given to a freshly started busy process to get onto a core before timing starts.
BUSY_SETTLE_S = 0.3

#: The busy process: a pure-Python loop that burns one core and exits when its parent goes away
#: (so even a parent killed by SIGKILL does not leave it behind).
_BUSY_CODE = (
    "import os\n"
    "parent = os.getppid()\n"
    "x = 0\n"
    "while os.getppid() == parent:\n"
    "    for _ in range(200000):\n"
    "        x = (x * 1103515245 + 12345) % 2147483648\n"
)


@dataclass(frozen=True)
class Spread:
    """Seconds over repeats: ``median``, quartiles ``q1``/``q3``, ``low``/``high`` extremes, ``n`` runs."""

    median: float
    q1: float
    q3: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, seconds: list[float]) -> Spread:
        s = sorted(seconds)
        if len(s) >= 2:
            q1, _, q3 = statistics.quantiles(s, n=4, method="inclusive")
        else:
            q1 = q3 = s[0]
        return cls(statistics.median(s), q1, q3, s[0], s[-1], len(s))

    def scaled(self, factor: float) -> Spread:
        """The same spread with every time multiplied by ``factor`` (seconds per call -> per item)."""
        return Spread(self.median * factor, self.q1 * factor, self.q3 * factor, self.low * factor,
                      self.high * factor, self.n)


def measure(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> Spread:
    """The spread of ``fn()``'s wall time over ``repeats`` runs, after ``warmup`` untimed runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return Spread.of(times)


def per_call(fn: Callable[[int], Any], n: int, repeats: int) -> Spread:
    """The spread of one call's wall time: ``fn(i)`` for ``i`` in ``range(n)`` timed as a block,
    ``repeats`` blocks (after one untimed block), each divided by ``n``."""
    for i in range(n):
        fn(i)
    blocks = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        for i in range(n):
            fn(i)
        blocks.append((time.perf_counter() - t0) / n)
    return Spread.of(blocks)


@contextmanager
def busy_process() -> Iterator[subprocess.Popen[bytes]]:
    """Run a CPU-burning Python process beside the block; it is killed and reaped on the way out,
    whatever happens in the block (an exception, Ctrl-C), and exits on its own if this process dies."""
    proc = subprocess.Popen([sys.executable, "-c", _BUSY_CODE], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            # its own process group: a Ctrl-C reaches this process, which then kills it
                            start_new_session=True)
    try:
        time.sleep(BUSY_SETTLE_S)
        yield proc
    finally:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
