"""A Markdown table of a ``kinema bench --json FILE`` run (for docs/performance.md and NOTES.md).

Run ``python benchmarks/_table.py bench.json``.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _f(x: Any, fmt: str) -> str:
    return "–" if x is None else format(x, fmt)


def table(data: dict[str, Any]) -> str:
    lines = ["| workload | kinema /s | single call µs [IQR] | ≤1e-3 | ≤1e-4 | median err | worst err | "
             "ratio vs peers | beside busy /s (busy/quiet) |", "|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    absent = []
    for r in data["rows"]:
        if not r.get("available", True):
            lines.append(f"| `{r['workload']}` | {r['reason']} | | | | | | | |")
            continue
        if "figures" in r:
            figures = ", ".join(f"{k} {v:.4g}" for k, v in r["figures"].items())
            lines.append(f"| `{r['workload']}` | {figures} | | | | | | | |")
            continue
        iqr = r["single_call_us_iqr"]
        single = "–" if r["single_call_us"] is None else f"{r['single_call_us']:.1f} [{iqr[0]:.1f}–{iqr[1]:.1f}]"
        ratios = ", ".join(f"{k[9:]} {v:,.1f}×" for k, v in r.items() if k.startswith("ratio_vs_")) or "–"
        busy = f"{r['busy']['solves_per_s']:,.0f} (×{r['busy_over_quiet']:.2f})" if "busy" in r else "–"
        lines.append(f"| `{r['workload']}` | {r['solves_per_s']:,.0f} {r['unit']}/s | {single} | "
                     f"{_f(r['within_1e-3'], '.3f')} | {_f(r['within_1e-4'], '.3f')} | "
                     f"{_f(r['median_error'], '.1e')} | "
                     f"{_f(r['worst_error'], '.1e')} | {ratios} | {busy} |")
        absent += [f"{r['workload']}: {n}: {e['reason']}" for n, e in r["peers"].items() if not e["available"]]
    return "\n".join(lines) + ("\n\nPeers absent: " + "; ".join(absent) if absent else "")


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(table(json.load(f)))
