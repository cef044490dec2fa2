"""The suite's two pictures (matplotlib, Agg backend, PNG): the only module of kinema that imports
matplotlib (``pip install "kinema[bench]"``).

* :func:`plot_accuracy`: on the 10-bone set, median end error (log scale) against microseconds per
  solve, one line per solver and peer through its iteration counts;
* :func:`plot_throughput`: solves per second against batch size (log-log), one line per solver.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

__all__ = ["plot_accuracy", "plot_throughput", "pyplot"]

#: Errors are drawn on a log axis; an exact solve (error 0) is drawn at this floor.
ERROR_FLOOR = 1e-16


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (no display needed); ImportError when not installed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _by_solver(points: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        out.setdefault(p["solver"], []).append(p)
    return out


def _finish(plt: Any, fig: Any, ax: Any, xlabel: str, ylabel: str, title: str) -> bytes:
    """Both plots' common ending: log-log axes, labels, grid and legend; the figure as PNG bytes, closed."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    data = _png(fig)
    plt.close(fig)
    return data


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()


def plot_accuracy(points: Sequence[dict[str, Any]], title: str) -> bytes:
    """PNG bytes: median error against microseconds per solve, each point labelled with its
    iteration count (``points`` from :func:`kinema.bench._suite.chain_accuracy_curves`)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for solver, pts in _by_solver(points).items():
        pts = sorted(pts, key=lambda p: p["us_per_solve"])
        xs = [p["us_per_solve"] for p in pts]
        ys = [max(p["median_error"], ERROR_FLOOR) for p in pts]
        ax.plot(xs, ys, marker="o", label=solver)
        for p, x, y in zip(pts, xs, ys, strict=True):
            if p.get("iterations") is not None:
                ax.annotate(str(p["iterations"]), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    return _finish(plt, fig, ax, "time per solve, one call each (microseconds, log)",
                   "median end error (chain units, log)", title)


def plot_throughput(points: Sequence[dict[str, Any]], title: str) -> bytes:
    """PNG bytes: solves per second against batch size (``points`` from
    :func:`kinema.bench._suite.batch_size_curves`)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for solver, pts in _by_solver(points).items():
        pts = sorted(pts, key=lambda p: p["batch"])
        ax.plot([p["batch"] for p in pts], [p["solves_per_s"] for p in pts], marker="o", label=solver)
    return _finish(plt, fig, ax, "batch size (items in one call, log)", "solves (FK: frames) per second, log", title)
