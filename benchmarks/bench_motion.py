"""Issue 18's motion-quality figures, landed behaviour (default options) beside the new options, one table.

Run: ``python benchmarks/bench_motion.py``.  Each part is a module of this folder exposing
``figures() -> list[dict]`` (keys ``name, landed, now, threshold, unit``): ``_motion_two_bone`` (pole-axis
offsets, history on/off, two-bone twist loop), ``_motion_chains`` (CCD/FABRIK pole loop, chain twist loops,
tree convergence), ``_motion_footlock`` (foot lock).  A part that is missing prints a row saying so.  The
figures are angles and ratios (deterministic), not times; a row is "ok" when ``now`` meets the threshold
(at most it; "at least" for rows whose unit starts with ">=").
"""

from __future__ import annotations

import importlib
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("KINEMA_COMPILE", "always")  # time compiled kernels only (kinema._kernels._tier)

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: The parts, in the order they print.
PARTS = ("_motion_two_bone", "_motion_chains", "_motion_footlock")


def collect(parts: tuple[str, ...] = PARTS) -> list[dict[str, Any]]:
    """Every part's rows; a part that cannot be imported gives one row naming it (``landed``/``now`` None)."""
    rows: list[dict[str, Any]] = []
    for part in parts:
        try:
            module = importlib.import_module(part)
        except ModuleNotFoundError as exc:
            if exc.name != part:
                raise
            rows.append(dict(name=f"{part}: not written yet (benchmarks/{part}.py missing)", landed=None, now=None,
                             threshold=None, unit=""))
            continue
        rows.extend(module.figures())
    return rows


#: The parts ``figures(quick=True)`` runs (``kinema bench --quick`` must stay short): the two-bone sweeps.
QUICK_PARTS = ("_motion_two_bone",)


def figures(quick: bool = False) -> dict[str, float]:
    """``{figure name: now}`` for ``kinema bench``'s motion-sweeps row (the figures with a value only)."""
    rows = collect(QUICK_PARTS if quick else PARTS)
    return {str(r["name"]): float(r["now"]) for r in rows if r["now"] is not None}


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, (int,)) and not isinstance(x, bool):
        return str(x)
    v = float(x)
    if v != 0.0 and (abs(v) < 1e-3 or abs(v) >= 1e5) or not math.isfinite(v):
        return f"{v:.2e}"
    return f"{v:.3f}"


def _status(row: dict[str, Any]) -> str:
    if row["now"] is None or row["threshold"] is None:
        return ""
    at_least = str(row["unit"]).startswith(">=")
    ok = row["now"] >= row["threshold"] if at_least else row["now"] <= row["threshold"]
    return "ok" if ok else "FAIL"


def table(rows: list[dict[str, Any]]) -> str:
    head = ("figure", "landed", "now", "threshold", "unit", "")
    body = [(r["name"], _fmt(r["landed"]), _fmt(r["now"]), _fmt(r["threshold"]), str(r["unit"]), _status(r))
            for r in rows]
    widths = [max(len(str(c)) for c in col) for col in zip(head, *body, strict=True)]
    lines = ["  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                       for i, (c, w) in enumerate(zip(line, widths, strict=True)))
             for line in (head, *body)]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def main() -> int:
    start = time.perf_counter()
    rows = collect()
    print(table(rows))
    print(f"\n{len(rows)} rows in {time.perf_counter() - start:.0f} s (figures are angles: deterministic)")
    return 1 if any(_status(r) == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
